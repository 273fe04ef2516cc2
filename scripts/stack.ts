/**
 * Runs the whole local stack: database → migrations → seed → payment provider → worker → web app.
 *
 *   tsx scripts/stack.ts dev     `pnpm dev`:   next dev, data kept in .data/, @idem/idempotency rebuilt on change
 *   tsx scripts/stack.ts start   `pnpm start`: next start (after `pnpm build`), data kept in .data/
 *   tsx scripts/stack.ts e2e     Playwright:   next start on a fresh database that is dropped on exit
 *
 * With DATABASE_URL the named database is used (e2e creates a scratch database on that server). Without it,
 * a real Postgres is embedded from npm. Ctrl-C stops everything this script started.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrateDatabase, repoRoot, runPrisma } from '@idem/dev-db/migrate';
import {
  assertPortFree,
  createDatabase,
  databaseExists,
  databaseNameOf,
  dropDatabase,
  messageOf,
  type PostgresServer,
  StackError,
  scratchDatabaseName,
  startEmbeddedServer,
  useExternalServer,
  withDatabase,
} from '@idem/dev-db/postgres';
import { demoUsers } from '@idem/dev-db/seed-data';
import {
  type ManagedProcess,
  startProcess,
  stopProcesses,
  waitForHttp,
  waitForOutput,
} from './lib/processes.ts';
import { type StackMode, stackSecrets } from './lib/secrets.ts';

const mode = process.argv[2] as StackMode;
if (!['dev', 'start', 'e2e'].includes(mode)) {
  console.error('usage: tsx scripts/stack.ts dev|start|e2e');
  process.exit(2);
}

const webPort = Number(process.env.PORT ?? (mode === 'e2e' ? 3100 : 3000));
const providerPort = Number(process.env.PROVIDER_PORT ?? (mode === 'e2e' ? 4100 : 4000));
const host = process.env.HOST ?? '127.0.0.1';
const dataDir = path.resolve(repoRoot, process.env.IDEM_DATA_DIR ?? '.data');
const libraryDir = path.join(repoRoot, 'packages/idempotency');
// 5432 usually belongs to a system Postgres; the embedded one stays out of its way.
const embeddedPort = Number(process.env.EMBEDDED_PG_PORT ?? (mode === 'e2e' ? 54339 : 54329));

const cleanups: Array<() => Promise<void>> = [];
const children: ManagedProcess[] = [];
let stopping = false;

function log(message: string) {
  console.log(`\x1b[1m[idem]\x1b[0m ${message}`);
}

async function shutdown(exitCode: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    log('stopping…');
    await stopProcesses(children);
    for (const cleanup of cleanups.reverse()) {
      await cleanup().catch((error) => console.error(`[idem] cleanup failed: ${messageOf(error)}`));
    }
    log('stopped.');
  }
  process.exit(exitCode);
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => void shutdown(0));
}

async function provisionDatabase(): Promise<string> {
  let server: PostgresServer;
  const externalUrl = process.env.DATABASE_URL;
  if (externalUrl) {
    server = await useExternalServer(externalUrl);
  } else {
    const pgdata =
      mode === 'e2e' ? mkdtempSync(path.join(os.tmpdir(), 'idem-e2e-pg-')) : path.join(dataDir, 'postgres');
    if (mode === 'e2e') cleanups.push(async () => rmSync(pgdata, { recursive: true, force: true }));
    log(`no DATABASE_URL: starting embedded Postgres on 127.0.0.1:${embeddedPort}…`);
    server = await startEmbeddedServer({ dataDir: pgdata, port: embeddedPort });
  }
  cleanups.push(() => server.stop());
  log(`database server: ${server.description}`);

  if (mode === 'e2e') {
    const name = scratchDatabaseName('idem_e2e');
    const url = await createDatabase(server.adminUrl, name);
    // An embedded cluster is deleted whole; on a shared server, drop what this run created.
    if (externalUrl) cleanups.push(() => dropDatabase(server.adminUrl, name));
    return url;
  }
  if (externalUrl) return externalUrl;
  if (!(await databaseExists(server.adminUrl, 'idem'))) await createDatabase(server.adminUrl, 'idem');
  return withDatabase(server.adminUrl, 'idem');
}

async function main() {
  await assertPortFree(webPort, host);
  await assertPortFree(providerPort, host);

  // Every process below loads @idem/idempotency from its build (`exports` → dist/), as an app outside the
  // repository would.
  let libraryBuilt: Promise<void> = Promise.resolve();
  if (mode === 'dev') {
    // tsc in watch mode: its first pass builds dist/ (while the database starts), later ones rebuild it on every
    // change of the library's source, which `next dev` picks up. Nothing that imports the library starts before
    // the first pass is written out.
    const library = startProcess(
      'library',
      process.execPath,
      [
        path.join(libraryDir, 'node_modules/typescript/bin/tsc'),
        '-p',
        path.join(libraryDir, 'tsconfig.build.json'),
        '--watch',
        '--preserveWatchOutput',
      ],
      { cwd: libraryDir, env: process.env, color: 32 },
    );
    children.push(library);
    libraryBuilt = waitForOutput(library, /Watching for file changes/, 120_000).catch((error: unknown) => {
      throw new StackError(`@idem/idempotency did not build: ${messageOf(error)}`);
    });
    // Awaited below, after the database: a failure before then must not be an unhandled rejection.
    libraryBuilt.catch(() => undefined);
    const generated = runPrisma(['generate']);
    if (generated.status !== 0) throw new StackError(`prisma generate failed:\n${generated.stderr}`);
  } else if (!existsSync(path.join(repoRoot, 'apps/web/.next/BUILD_ID'))) {
    throw new StackError('No production build of apps/web: run `pnpm build` first.');
  } else if (!existsSync(path.join(libraryDir, 'dist/index.js'))) {
    throw new StackError(
      'No build of @idem/idempotency (packages/idempotency/dist): run `pnpm build` first.',
    );
  }

  const databaseUrl = await provisionDatabase();
  await libraryBuilt;
  const { applied } = await migrateDatabase(databaseUrl);
  log(`migrations applied: ${applied.length} (${databaseNameOf(databaseUrl)})`);

  // Imported only now: on a fresh clone the Prisma client is generated a few lines above.
  const { createPrismaClient } = await import('@idem/db');
  const { seedDatabase } = await import('@idem/dev-db/seed');
  const db = createPrismaClient({ connectionString: databaseUrl, max: 1 });
  const { productsCreated } = await seedDatabase(db).finally(() => db.$disconnect());
  if (productsCreated > 0) log(`seeded ${productsCreated} products`);

  const providerUrl = `http://${host}:${providerPort}`;
  // The same secrets for every process: the provider's API key and webhook secret must match on both sides.
  const secrets = stackSecrets(mode, dataDir, process.env);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...secrets,
    DATABASE_URL: databaseUrl,
    PROVIDER_URL: providerUrl,
    NEXT_TELEMETRY_DISABLED: '1',
  };
  const nodeEnv = mode === 'dev' ? 'development' : 'production';
  // Production marks the session cookies Secure. Browsers keep those over plain HTTP only on loopback
  // (localhost, 127.0.0.1), so a stack served over HTTP on another address would lose every session.
  const loopback = ['127.0.0.1', 'localhost', '::1'].includes(host);
  if (nodeEnv === 'production' && !loopback && process.env.COOKIE_SECURE === undefined) {
    env.COOKIE_SECURE = 'false';
    log(
      `serving plain HTTP on ${host}: session cookies without Secure (set COOKIE_SECURE=true behind HTTPS)`,
    );
  }

  const tsx = ['--import', 'tsx'];
  children.push(
    startProcess('provider', process.execPath, [...tsx, 'apps/provider/src/main.ts'], {
      cwd: repoRoot,
      env: {
        ...env,
        NODE_ENV: nodeEnv,
        PORT: String(providerPort),
        HOST: host,
        PROVIDER_TEST_KNOBS: mode === 'e2e' ? '1' : (process.env.PROVIDER_TEST_KNOBS ?? '0'),
        PROVIDER_WEBHOOK_URL: `http://${host}:${webPort}/api/webhooks/provider`,
      },
      color: 35,
    }),
    startProcess('worker', process.execPath, [...tsx, 'apps/worker/src/main.ts'], {
      cwd: repoRoot,
      env,
      color: 33,
    }),
  );
  const nextBin = path.join(repoRoot, 'apps/web/node_modules/next/dist/bin/next');
  children.push(
    startProcess(
      'web',
      process.execPath,
      [nextBin, mode === 'dev' ? 'dev' : 'start', '-p', String(webPort), '-H', host],
      {
        cwd: path.join(repoRoot, 'apps/web'),
        env: { ...env, PORT: String(webPort), NODE_ENV: nodeEnv },
        color: 36,
      },
    ),
  );
  for (const child of children) {
    void child.exited.then((code) => {
      if (stopping) return;
      console.error(`[idem] ${child.name} exited unexpectedly (code ${code}); stopping the stack.`);
      void shutdown(1);
    });
  }

  const alive = () => !stopping;
  await waitForHttp(`${providerUrl}/health`, 60_000, alive);
  await waitForHttp(`http://${host}:${webPort}/api/health`, 120_000, alive);
  const webUrl = `http://${host === '127.0.0.1' ? 'localhost' : host}:${webPort}`;
  log(`checkout ready at ${webUrl}`);
  log(`payment provider at ${providerUrl}`);
  log('demo API tokens (Authorization: Bearer <token>):');
  for (const demo of demoUsers)
    log(
      `  ${demo.email.padEnd(20)} ${demo.token}${demo.role === 'admin' ? '  (admin: sign in at /admin/login)' : ''}`,
    );
  if (secrets.METRICS_TOKEN)
    log(`metrics: curl -H 'authorization: Bearer ${secrets.METRICS_TOKEN}' ${webUrl}/api/metrics`);
  if (mode === 'start')
    log(`secrets (provider key, webhook secret, session, metrics token) kept in ${dataDir}`);
  log('press Ctrl-C to stop');
}

main().catch(async (error) => {
  console.error(`\x1b[31m[idem] ${error instanceof StackError ? error.message : messageOf(error)}\x1b[0m`);
  if (!(error instanceof StackError) && error instanceof Error && error.stack) console.error(error.stack);
  await shutdown(1);
});
