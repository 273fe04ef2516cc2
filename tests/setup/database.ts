/**
 * Vitest global setup: one fresh, migrated database per test run, dropped at the end. The server is
 * DATABASE_URL's when set, otherwise a real embedded Postgres in a temporary directory. Tests that need an
 * empty database of their own create one on `postgresAdminUrl`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrateDatabase } from '@idem/dev-db/migrate';
import {
  createDatabase,
  dropDatabase,
  type PostgresServer,
  scratchDatabaseName,
  startEmbeddedServer,
  useExternalServer,
} from '@idem/dev-db/postgres';
import type { TestProject } from 'vitest/node';
import { freePort } from './free-port.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A migrated database for this run. */
    databaseUrl: string;
    /** The server's maintenance database, for tests that create databases of their own. */
    postgresAdminUrl: string;
  }
}

export default async function setup(project: TestProject) {
  let server: PostgresServer;
  let tempDir: string | undefined;
  if (process.env.DATABASE_URL) {
    server = await useExternalServer(process.env.DATABASE_URL);
  } else {
    tempDir = mkdtempSync(path.join(os.tmpdir(), 'idem-test-pg-'));
    server = await startEmbeddedServer({ dataDir: path.join(tempDir, 'pgdata'), port: await freePort() });
  }
  const name = scratchDatabaseName('idem_test');
  const databaseUrl = await createDatabase(server.adminUrl, name);
  await migrateDatabase(databaseUrl);
  project.provide('databaseUrl', databaseUrl);
  project.provide('postgresAdminUrl', server.adminUrl);

  return async () => {
    await dropDatabase(server.adminUrl, name);
    await server.stop();
    if (tempDir) rmSync(tempDir, { recursive: true, force: true });
  };
}
