/**
 * Applies the committed migrations with the real Prisma CLI (through the offline engine wired in
 * prisma.config.ts), then checks the result in the database itself: a broken engine path can exit 0 having
 * done nothing, so the exit code alone is not trusted.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { StackError } from './postgres.ts';

export const repoRoot = path.resolve(import.meta.dirname, '../../..');
const migrationsDir = path.join(repoRoot, 'prisma/migrations');
const prismaCli = path.join(repoRoot, 'node_modules/prisma/build/index.js');

export function migrationNames(): string[] {
  return readdirSync(migrationsDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
}

export function runPrisma(args: string[], databaseUrl?: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, PRISMA_HIDE_UPDATE_MESSAGE: '1' };
  if (databaseUrl) env.DATABASE_URL = databaseUrl;
  return spawnSync(process.execPath, [prismaCli, ...args], { cwd: repoRoot, env, encoding: 'utf8' });
}

export async function migrateDatabase(databaseUrl: string): Promise<{ applied: string[] }> {
  const result = runPrisma(['migrate', 'deploy'], databaseUrl);
  if (result.status !== 0) {
    throw new StackError(`prisma migrate deploy failed:\n${result.stdout}${result.stderr}`);
  }
  const applied = await appliedMigrations(databaseUrl);
  const missing = migrationNames().filter((name) => !applied.includes(name));
  if (missing.length > 0) {
    throw new StackError(`prisma migrate deploy exited 0 but did not apply: ${missing.join(', ')}`);
  }
  return { applied };
}

export async function appliedMigrations(databaseUrl: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ migration_name: string }>(
      `select migration_name from _prisma_migrations
       where finished_at is not null and rolled_back_at is null order by migration_name`,
    );
    return rows.map((row) => row.migration_name);
  } catch {
    return [];
  } finally {
    await client.end();
  }
}
