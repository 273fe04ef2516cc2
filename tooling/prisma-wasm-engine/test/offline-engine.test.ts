/**
 * End-to-end: the real Prisma CLI, run as a child process WITHOUT PRISMA_SCHEMA_ENGINE_BINARY in its environment,
 * must pick up the wasm engine from prisma.config.ts and really migrate a fresh database. Every migration is
 * checked in the database itself: a wrong engine can make the CLI report success having done nothing, so the
 * negative control at the end proves that these checks fail in that case.
 */
import { execFile } from 'node:child_process';
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaEngineBinaryPath } from '../src/index.ts';

const repoRoot = path.resolve(import.meta.dirname, '../../..');
const prismaCli = path.join(repoRoot, 'node_modules/prisma/build/index.js');
const prismaConfigModule = path.join(repoRoot, 'node_modules/prisma/config.js');
const migrationsDir = path.join(repoRoot, 'prisma/migrations');
const SHOP_TABLES = ['products', 'users', 'api_tokens', 'orders', 'order_items', 'payments'];

// A fresh database on DATABASE_URL's server (the root vitest setup points it at the run's server), else localhost.
const serverUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const runId = `${process.pid}_${Date.now().toString(36)}`;
const deployDb = `idem_engine_deploy_${runId}`;
const devDb = `idem_engine_dev_${runId}`; // created by the CLI itself (`cli create-database`)
const controlDb = `idem_engine_control_${runId}`;

function databaseUrl(database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  url.searchParams.delete('schema');
  return url.toString();
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const adminUrl = databaseUrl('postgres');
const createDatabase = (name: string) => withClient(adminUrl, (c) => c.query(`CREATE DATABASE "${name}"`));
const dropDatabase = (name: string) =>
  withClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));

type CliResult = { code: number | string | null; stdout: string; stderr: string };

/** Run the real Prisma CLI. `env` entries set to undefined are removed from the child's environment. */
function prisma(args: string[], options: { cwd?: string; env?: Record<string, string | undefined> } = {}) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // The point of these tests: the CLI must find the engine through prisma.config.ts, not through our env.
  delete env.PRISMA_SCHEMA_ENGINE_BINARY;
  delete env.PRISMA_OFFLINE_ENGINE;
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return new Promise<CliResult>((resolve) => {
    execFile(
      process.execPath,
      [prismaCli, ...args],
      // A hang, not a slow machine: `migrate dev` (two databases, the wasm engine) took over 45 s with the other
      // suites running beside it and a busy core.
      { cwd: options.cwd ?? repoRoot, env, timeout: 150_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? (error.code ?? error.signal ?? null) : 0, stdout, stderr }),
    );
  });
}

/** Fails the test with the CLI's output when the command did not succeed. */
function expectSuccess(result: CliResult) {
  expect(result, `${result.stdout}\n${result.stderr}`).toMatchObject({ code: 0 });
}

/** The database really holds these tables and one finished, not rolled back, row per migration. */
async function expectMigrated(url: string, migrationNames: string[], tables: string[]) {
  await withClient(url, async (client) => {
    const { rows: tableRows } = await client.query<{ tablename: string }>(
      "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
    );
    expect(tableRows.map((row) => row.tablename)).toEqual(
      expect.arrayContaining([...tables, '_prisma_migrations']),
    );
    const { rows } = await client.query<{
      migration_name: string;
      finished_at: Date | null;
      rolled_back_at: Date | null;
    }>('SELECT migration_name, finished_at, rolled_back_at FROM _prisma_migrations ORDER BY migration_name');
    expect(rows.map((row) => row.migration_name)).toEqual([...migrationNames].sort());
    for (const row of rows) {
      expect(row.finished_at, row.migration_name).not.toBeNull();
      expect(row.rolled_back_at, row.migration_name).toBeNull();
    }
  });
}

async function migrationFolders(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
}

let tmpDir: string;
let committedMigrations: string[];

beforeAll(async () => {
  tmpDir = await mkdtemp(path.join(os.tmpdir(), 'prisma-wasm-engine-test-'));
  committedMigrations = await migrationFolders(migrationsDir);
  expect(committedMigrations.length).toBeGreaterThan(0);
  await createDatabase(deployDb);
  await createDatabase(controlDb);
}, 30_000);

afterAll(async () => {
  for (const name of [deployDb, devDb, controlDb]) await dropDatabase(name).catch(() => {});
  if (tmpDir) await rm(tmpDir, { recursive: true, force: true });
}, 30_000);

describe('the Prisma CLI with prisma.config.ts, offline', { timeout: 180_000 }, () => {
  it('uses the wasm engine without PRISMA_SCHEMA_ENGINE_BINARY in the environment', async () => {
    const result = await prisma(['--version']);
    expectSuccess(result);
    expect(result.stdout).toContain('prisma-wasm-engine');
    expect(result.stdout).toContain('resolved by PRISMA_SCHEMA_ENGINE_BINARY');
    expect(result.stdout).toContain(path.relative(repoRoot, schemaEngineBinaryPath));
  });

  it('generates the client without DATABASE_URL', async () => {
    const schema = await readFile(path.join(repoRoot, 'prisma/schema.prisma'), 'utf8');
    const schemaPath = path.join(tmpDir, 'generate/schema.prisma');
    await mkdir(path.dirname(schemaPath));
    await writeFile(schemaPath, schema.replace(/output\s*=\s*"[^"]*"/, 'output = "./generated"'));

    const result = await prisma(['generate', '--schema', schemaPath], { env: { DATABASE_URL: undefined } });
    expectSuccess(result);
    expect(await readdir(path.join(tmpDir, 'generate/generated'))).toContain('client.ts');
  });

  it('migrate deploy applies every committed migration', async () => {
    const url = databaseUrl(deployDb);
    expectSuccess(await prisma(['migrate', 'deploy'], { env: { DATABASE_URL: url } }));
    await expectMigrated(url, committedMigrations, SHOP_TABLES);
  });

  it('migrate status reports the database up to date', async () => {
    const result = await prisma(['migrate', 'status'], { env: { DATABASE_URL: databaseUrl(deployDb) } });
    expectSuccess(result);
    expect(result.stdout).toContain('Database schema is up to date!');
  });

  it('migrate dev creates and applies a second migration (shadow database included)', async () => {
    // A copy of the project in a temp dir, with one more model; prisma/ is left untouched.
    const project = path.join(tmpDir, 'dev');
    await cp(migrationsDir, path.join(project, 'migrations'), { recursive: true });
    const schema = await readFile(path.join(repoRoot, 'prisma/schema.prisma'), 'utf8');
    await writeFile(
      path.join(project, 'schema.prisma'),
      `${schema}\nmodel Widget {\n  id    Int    @id @default(autoincrement())\n  label String\n\n  @@map("widgets")\n}\n`,
    );
    await writeFile(
      path.join(project, 'prisma.config.ts'),
      [
        `import { enableOfflineSchemaEngine } from ${JSON.stringify(path.resolve(import.meta.dirname, '../src/index.ts'))};`,
        `import { defineConfig } from ${JSON.stringify(prismaConfigModule)};`,
        'enableOfflineSchemaEngine();',
        "export default defineConfig({ schema: 'schema.prisma', migrations: { path: 'migrations' },",
        '  datasource: { url: process.env.DATABASE_URL } });',
        '',
      ].join('\n'),
    );
    const url = databaseUrl(devDb);

    // The database does not exist yet: the CLI creates it, applies the committed migrations, then creates the
    // new one (the path that needs the engine's shadow-database workaround).
    const result = await prisma(['migrate', 'dev', '--name', 'add_widgets'], {
      cwd: project,
      env: { DATABASE_URL: url },
    });
    expectSuccess(result);

    const folders = await migrationFolders(path.join(project, 'migrations'));
    expect(folders).toHaveLength(committedMigrations.length + 1);
    const created = folders.find((name) => name.endsWith('_add_widgets'));
    expect(created).toBeDefined();
    const sql = await readFile(path.join(project, 'migrations', `${created}`, 'migration.sql'), 'utf8');
    expect(sql).toContain('CREATE TABLE "widgets"');
    await expectMigrated(url, folders, [...SHOP_TABLES, 'widgets']);
  });

  it('negative control: an engine that answers "success" without doing anything fails the checks', async () => {
    // The dangerous failure mode: the CLI reports success, the database is untouched.
    const fakeEngine = path.join(tmpDir, 'lying-engine.mjs');
    await writeFile(
      fakeEngine,
      [
        '#!/usr/bin/env node',
        "import { createInterface } from 'node:readline';",
        "if (process.argv.includes('--version')) { console.log('lying-engine 0'); process.exit(0); }",
        "if (process.argv.includes('cli')) process.exit(0);",
        "process.stderr.write('{}\\n');",
        "createInterface({ input: process.stdin }).on('line', (line) => {",
        '  const { id } = JSON.parse(line);',
        '  const result = { appliedMigrationNames: [], history: null, failedMigrationNames: [],',
        '    editedMigrationNames: [], hasMigrationsTable: true };',
        "  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, result }) + '\\n');",
        '});',
        '',
      ].join('\n'),
    );
    await chmod(fakeEngine, 0o755);
    const url = databaseUrl(controlDb);

    await prisma(['migrate', 'deploy'], {
      env: { DATABASE_URL: url, PRISMA_SCHEMA_ENGINE_BINARY: fakeEngine },
    });

    // Whatever the CLI's exit code, the database checks used above must catch it.
    await expect(expectMigrated(url, committedMigrations, SHOP_TABLES)).rejects.toThrow();
  });
});
