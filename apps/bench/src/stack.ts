/**
 * What `pnpm bench` measures: a scratch database on DATABASE_URL's server (migrated, seeded, plus the
 * `bench_effects` table the bench procedures write), the payment provider (in-process), and ONE web process, the
 * app's test server (apps/web/test/server/main.ts: the app's API from its own modules plus `bench.*`, served by
 * node:http, NODE_ENV=production). Everything started is registered on the run's Teardown, which also runs on
 * SIGINT and SIGTERM.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createPrismaClient } from '@idem/db';
import { startProvider } from '@idem/provider';
import pg from 'pg';
import { log } from './log.ts';
import type { BenchOptions } from './options.ts';
import { BENCH_EFFECTS_TABLE } from './peers/effect.ts';
import {
  createDatabase,
  dropDatabase,
  migrateDatabase,
  redact,
  repoRoot,
  scratchDatabaseName,
  seedDatabase,
  useExternalServer,
  withDatabase,
} from './repository.ts';
import { body, requestHeaders } from './requests.ts';
import type { Teardown } from './teardown.ts';

const WEB_DIR = path.join(repoRoot, 'apps/web');
/** Node's flags and the script that start the app's test server, from WEB_DIR. */
const TEST_SERVER_FLAGS = ['--conditions=react-server', '--import', 'tsx'];
const TEST_SERVER_SCRIPT = 'test/server/main.ts';

export interface Stack {
  /** The web test server. */
  url: string;
  /** The scratch database. */
  databaseUrl: string;
  /** The server's maintenance database: where a section creates a scratch database of its own. */
  adminUrl: string;
  /** One connection to the scratch database, for the sections' own queries. */
  client: pg.Client;
  postgresVersion: string;
  /** Undoes all of the above; a section registers what it starts on it too. */
  teardown: Teardown;
  /** The web test server's process (its pid for CPU accounting, its IPC channel when `web.ipc` asked for one). */
  webProcess: ChildProcess;
}

/** How the web test server is started, for a profiler (`pnpm bench` starts it plain). */
export interface WebOptions {
  /** More Node arguments, before the script (e.g. `--import <probe>`). */
  nodeArgs?: readonly string[];
  /** An IPC channel to the process (`process.send` in it). */
  ipc?: boolean;
  /** The server's connections' `application_name`, to find them in `pg_stat_activity`. */
  applicationName?: string;
}

/** On SIGINT or SIGTERM: undo everything, then exit with 130. */
export function stopOnSignals(teardown: Teardown): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping and dropping the scratch database`);
      void teardown.run().finally(() => process.exit(130));
    });
  }
}

export async function startStack(
  options: BenchOptions,
  teardown: Teardown,
  web: WebOptions = {},
): Promise<Stack> {
  // The bench builds nothing: the test server runs from apps/web's production build.
  if (!existsSync(path.join(WEB_DIR, '.next/BUILD_ID'))) {
    throw new Error('No production build of apps/web: run `pnpm build` first.');
  }
  const server = await useExternalServer(options.postgresUrl);
  const adminUrl = server.adminUrl;
  const name = scratchDatabaseName('idem_bench');
  const databaseUrl = await createDatabase(adminUrl, name);
  teardown.add(() => dropDatabase(adminUrl, name));
  log(`scratch database ${name} on ${redact(withDatabase(adminUrl, ''))}`);

  await migrateDatabase(databaseUrl);
  const db = createPrismaClient({ connectionString: databaseUrl, max: 1 });
  await seedDatabase(db).finally(() => db.$disconnect());
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  teardown.add(() => client.end());
  await client.query(BENCH_EFFECTS_TABLE);
  const postgresVersion =
    (await client.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v ?? '?';
  log('migrated and seeded; bench_effects created');

  // NODE_ENV=production refuses the provider's public demo secrets: both sides get generated ones.
  const providerSecretKey = `sk_bench_${randomBytes(32).toString('base64url')}`;
  const webhookSecret = `whsec_bench_${randomBytes(32).toString('base64url')}`;
  const provider = await startProvider({
    databaseUrl,
    port: 0,
    secretKey: providerSecretKey,
    webhookSecret,
    log: () => {},
  });
  teardown.add(() => provider.close());
  const webDatabaseUrl = web.applicationName
    ? withSearchParam(databaseUrl, 'application_name', web.applicationName)
    : databaseUrl;
  const { url, child: webProcess } = await startWeb(teardown, options.verbose, web, {
    DATABASE_URL: webDatabaseUrl,
    PROVIDER_URL: provider.url,
    PROVIDER_SECRET_KEY: providerSecretKey,
    PROVIDER_WEBHOOK_SECRET: webhookSecret,
    SESSION_SECRET: randomBytes(32).toString('base64url'),
    IDEM_RESPONSE_SECRET: randomBytes(32).toString('base64url'),
    // A benchmark places thousands of orders per principal: far past the production limits on new orders.
    IDEM_NEW_ORDERS_PER_PRINCIPAL: '100000000',
    IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS: '100000000',
    IDEM_PENDING_ORDERS_PER_PRINCIPAL: '100000000',
  });
  log(`test server (NODE_ENV=production) at ${url}, provider at ${provider.url}`);

  // Both procedures must answer 200 before anything is timed: a failing route would look fast.
  for (const procedure of ['protected', 'unprotected'] as const) {
    const response = await fetch(`${url}/api/trpc/bench.${procedure}`, {
      method: 'POST',
      headers: requestHeaders(randomUUID()),
      body: body(1),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`bench.${procedure}: HTTP ${response.status} ${text.slice(0, 300)}`);
  }
  return { url, databaseUrl, adminUrl, client, postgresVersion, teardown, webProcess };
}

/**
 * Starts the test server on a free loopback port with this process's environment plus `env`, and resolves with
 * its URL once /api/health answers. Its stdout is shown with BENCH_VERBOSE=1, its stderr always.
 */
async function startWeb(
  teardown: Teardown,
  verbose: boolean,
  web: WebOptions,
  env: Record<string, string>,
): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [...TEST_SERVER_FLAGS, ...(web.nodeArgs ?? []), TEST_SERVER_SCRIPT], {
    cwd: WEB_DIR,
    env: { ...process.env, ...env, NODE_ENV: 'production', PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', verbose ? 'inherit' : 'ignore', 'inherit', ...(web.ipc ? (['ipc'] as const) : [])],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  teardown.add(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  });
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error('the web process exited before it answered /api/health');
    try {
      const response = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return { url, child };
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url}/api/health did not answer within 60 s`);
}

/** `url` with one query parameter set. */
function withSearchParam(url: string, name: string, value: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set(name, value);
  return parsed.toString();
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
