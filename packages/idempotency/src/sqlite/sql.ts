/** SQL helpers of the SQLite store: the clock, the quoting rule and the error tests. */
import { someInChain, textOf } from '../stores/error-chain.ts';

/** The table the SQLite store and schema use unless told otherwise. */
export const DEFAULT_SQLITE_IDEMPOTENCY_TABLE = 'idempotency_keys';

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `name` as a quoted SQL identifier; anything else is refused (it is spliced into SQL). */
export function quoteSqliteTable(name: string): string {
  if (!TABLE_NAME.test(name)) throw new Error(`Invalid table name: ${name}`);
  return `"${name}"`;
}

const TIME_FORMAT = `'%Y-%m-%dT%H:%M:%f+00:00'`;

/**
 * SQLite's clock, never the app's: `'now'` is read once per statement step (every use in one statement sees the
 * same instant) with millisecond resolution (`%f` = SS.SSS), as UTC ISO-8601 text.
 */
export const SQLITE_NOW = `strftime(${TIME_FORMAT}, 'now')`;

/** SQLite's clock plus the seconds bound to `param` (a number; fractions kept to the millisecond). */
export function sqliteNowPlus(param: string): string {
  return `strftime(${TIME_FORMAT}, 'now', printf('%+.3f seconds', ${param}))`;
}

/**
 * SQLITE_BUSY (and its extended codes, e.g. SQLITE_BUSY_SNAPSHOT): another connection held the write lock past
 * `busy_timeout`, or a read transaction could not be upgraded to a write one.
 */
export function isSqliteBusy(error: unknown): boolean {
  return someInChain(
    error,
    (candidate) =>
      textOf(candidate.code).startsWith('SQLITE_BUSY') ||
      textOf(candidate.originalCode).startsWith('SQLITE_BUSY') ||
      /database is locked/i.test(textOf(candidate.message)) ||
      /database is locked/i.test(textOf(candidate.originalMessage)),
  );
}

/** The better-sqlite3 client's (`sqliteDatabaseExecutor`) wait for its one connection ran past `maxWait`. */
export class SqliteConnectionWaitError extends Error {
  override readonly name = 'SqliteConnectionWaitError';
}

/**
 * A transaction that could not start within `maxWait` (Prisma's P2028, or `SqliteConnectionWaitError`): with
 * SQLite's one connection per client, that is waiting for this process's current writer (the in-process lock
 * wait).
 */
export function isTransactionStartTimeout(error: unknown): boolean {
  return someInChain(
    error,
    (candidate) =>
      candidate instanceof SqliteConnectionWaitError ||
      (candidate.code === 'P2028' &&
        /unable to start a transaction in the given time/i.test(textOf(candidate.message))),
  );
}

/** "no such table: <name>" from SQLite, through Prisma's wrapping. */
export function isSqliteMissingTable(error: unknown): boolean {
  return someInChain(
    error,
    (candidate) =>
      /no such table/i.test(textOf(candidate.message)) ||
      /no such table/i.test(textOf(candidate.originalMessage)) ||
      (candidate as { kind?: unknown }).kind === 'TableDoesNotExist',
  );
}

/**
 * `sql` with `@name` placeholders → positional `?` SQL and its values in order. The adapter binds an array to
 * anonymous `?` parameters only (numbered `?1` is refused), so a value used twice is bound twice.
 */
export function bindNamed(sql: string, values: Record<string, unknown>): [string, ...unknown[]] {
  const args: unknown[] = [];
  const text = sql.replace(/@([A-Za-z]+)/g, (_, name: string) => {
    if (!(name in values)) throw new Error(`SQL parameter @${name} has no value`);
    args.push(values[name]);
    return '?';
  });
  return [text, ...args];
}
