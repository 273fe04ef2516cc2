/**
 * A better-sqlite3 `Database` as the client the SQLite store takes (`PrismaClientLike`), for an app without
 * Prisma (Hono, Express, …): the store's SQL is the same, only the way it is sent changes.
 *
 * better-sqlite3 is synchronous and has ONE connection per `Database`, while the store's transactions (and an
 * app's effect in transactional mode) are asynchronous callbacks. So, as Prisma's SQLite adapter does, the
 * connection is taken by one transaction at a time (an in-process queue, waited on at most `maxWait`), and every
 * statement sent outside a transaction waits its turn too: a bare statement sent while another transaction is
 * open would otherwise run INSIDE that transaction and be rolled back with it. A transaction past its `timeout`
 * is rolled back and its later statements refused (the fence), as are statements sent after its COMMIT or after
 * SQLite rolled it back on its own (a statement error that ends the transaction, e.g. a trigger's RAISE(ROLLBACK)).
 *
 * A statement that needs the write lock while another process holds it waits up to the connection's
 * busy_timeout (better-sqlite3's `timeout` option, default 5 000 ms) — synchronously, as every better-sqlite3
 * call does: that wait blocks this process's event loop. Keep writers to one process, or the timeout short.
 *
 * Structural: the library imports no driver; any better-sqlite3 `Database` (v11 and later) fits.
 */
import type { PrismaClientLike, SqlExecutor } from '../stores/prisma-client.ts';
import { timerDelay } from '../stores/timer-delay.ts';
import { TransactionClosedError } from '../stores/transaction-fence.ts';
import { SqliteConnectionWaitError } from './sql.ts';
import { createSqliteIdempotencyStore, type SqliteStoreOptions } from './store.ts';

export interface SqliteStatementLike {
  /** True for a statement that returns rows (a SELECT, a RETURNING clause, some PRAGMAs). */
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  /** Whether a transaction is open on the connection. */
  readonly inTransaction: boolean;
}

/** Prisma's defaults for an interactive transaction: 2 s to get the connection, 5 s to run. */
const DEFAULT_MAX_WAIT_MS = 2_000;
const DEFAULT_TIMEOUT_MS = 5_000;
/** Prepared statements kept per database (the store has a few dozen texts; an app's own add to them). */
const STATEMENT_CACHE_SIZE = 200;

export class SqliteTransactionTimeoutError extends Error {
  override readonly name = 'SqliteTransactionTimeoutError';
}

export type SqliteDatabaseExecutor = PrismaClientLike;

/** Each Database's queue for its one connection, shared by every executor on it. */
const turnsByDatabase = new WeakMap<SqliteDatabaseLike, { queue: Promise<void> }>();

/** `database` as the SQLite store's client. */
export function sqliteDatabaseExecutor(database: SqliteDatabaseLike): SqliteDatabaseExecutor {
  const prepared = new Map<string, SqliteStatementLike>();
  function statement(sql: string): SqliteStatementLike {
    let found = prepared.get(sql);
    if (found) {
      // Most recently used last: the first entry is the one to drop.
      prepared.delete(sql);
    } else {
      found = database.prepare(sql);
      if (prepared.size >= STATEMENT_CACHE_SIZE) prepared.delete(prepared.keys().next().value as string);
    }
    prepared.set(sql, found);
    return found;
  }
  const query = (sql: string, values: unknown[]) => {
    const prepared = statement(sql);
    // A statement that returns no rows (an INSERT without RETURNING): run, no rows — as Prisma's SQLite adapter
    // answers $queryRawUnsafe; the driver's all() would refuse it.
    if (!prepared.reader) {
      prepared.run(...values.map(bindable));
      return [];
    }
    return prepared.all(...values.map(bindable));
  };
  const execute = (sql: string, values: unknown[]) => {
    const prepared = statement(sql);
    return prepared.reader
      ? prepared.all(...values.map(bindable)).length
      : prepared.run(...values.map(bindable)).changes;
  };

  /**
   * The connection's turn: one transaction (or bare statement) at a time, in arrival order — per `database`, not
   * per executor: two executors (two stores, a store and the app's own) on one Database share its one connection,
   * and a BEGIN sent while the other's transaction is open would fail and ROLLBACK that transaction under it.
   */
  let turns = turnsByDatabase.get(database);
  if (!turns) {
    turns = { queue: Promise.resolve() };
    turnsByDatabase.set(database, turns);
  }
  const connection = turns;
  function takeTurn(maxWaitMs: number): Promise<() => void> {
    let release: () => void = () => {};
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const previous = connection.queue;
    connection.queue = previous.then(() => mine);
    return new Promise((resolve, reject) => {
      let waited = false;
      const timer = setTimeout(() => {
        waited = true;
        reject(new SqliteConnectionWaitError(`No turn on the SQLite connection within ${maxWaitMs} ms.`));
        // Its place in the queue passes on as soon as it comes.
        void previous.then(release);
      }, timerDelay(maxWaitMs));
      void previous.then(() => {
        if (waited) return;
        clearTimeout(timer);
        resolve(release);
      });
    });
  }

  /** A bare statement: alone on the connection, after whatever transaction holds it. */
  async function alone<T>(send: () => T): Promise<T> {
    const release = await takeTurn(DEFAULT_MAX_WAIT_MS);
    try {
      return send();
    } finally {
      release();
    }
  }

  return {
    $queryRawUnsafe: <T>(sql: string, ...values: unknown[]) => alone(() => query(sql, values) as T),
    $executeRawUnsafe: (sql: string, ...values: unknown[]) => alone(() => execute(sql, values)),

    async $transaction<R>(
      fn: (tx: never) => Promise<R>,
      options: { maxWait?: number; timeout?: number } = {},
    ): Promise<R> {
      const release = await takeTurn(options.maxWait ?? DEFAULT_MAX_WAIT_MS);
      let open = true;
      const whileOpen = <T>(send: () => T): Promise<T> => {
        // SQLite itself may have ended the transaction: some statement errors roll it back whole (a trigger's
        // RAISE(ROLLBACK), SQLITE_FULL, SQLITE_NOMEM, an I/O error). A statement sent after that would run alone in
        // autocommit and stay, whatever the callback does next: refused like one after a ROLLBACK.
        if (open && !database.inTransaction) open = false;
        if (!open) return Promise.reject(new TransactionClosedError());
        try {
          return Promise.resolve(send());
        } catch (error) {
          return Promise.reject(error);
        }
      };
      const tx: SqlExecutor = {
        $queryRawUnsafe: <T>(sql: string, ...values: unknown[]) => whileOpen(() => query(sql, values) as T),
        $executeRawUnsafe: (sql: string, ...values: unknown[]) => whileOpen(() => execute(sql, values)),
      };
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        // Deferred, as Prisma's adapter begins: the write lock is taken by the transaction's first write.
        execute('BEGIN', []);
        const timeoutMs = options.timeout ?? DEFAULT_TIMEOUT_MS;
        const timedOut = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new SqliteTransactionTimeoutError(
                  `The transaction ran past its timeout (${timeoutMs} ms) and was rolled back.`,
                ),
              ),
            timerDelay(timeoutMs),
          );
        });
        const result = await Promise.race([fn(tx as never), timedOut]);
        open = false;
        execute('COMMIT', []);
        return result;
      } catch (error) {
        open = false;
        // Whatever failed (the callback, the timeout, a COMMIT refused with SQLITE_BUSY), nothing of it may stay
        // open on the one connection the next transaction takes.
        if (database.inTransaction) execute('ROLLBACK', []);
        throw error;
      } finally {
        clearTimeout(timer);
        release();
      }
    },
  };
}

/**
 * better-sqlite3 binds numbers, bigints, strings, buffers and null; a boolean, undefined or Date is refused. A Date
 * is bound as Prisma's SQLite adapter binds it (ISO 8601 with +00:00: the store's own time format, so it compares
 * with the store's times as text).
 */
function bindable(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.toISOString().replace('Z', '+00:00');
  return value;
}

/** The SQLite store on a better-sqlite3 `Database`: the same table, SQL and guarantees as on Prisma. */
export function createBetterSqliteIdempotencyStore(
  database: SqliteDatabaseLike,
  options: SqliteStoreOptions = {},
) {
  return createSqliteIdempotencyStore(sqliteDatabaseExecutor(database), options);
}
