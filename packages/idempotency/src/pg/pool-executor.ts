/**
 * A node-postgres `Pool` as the client the Postgres store takes (`PrismaClientLike`): the store's SQL is the same,
 * only the way it is sent changes — `pool.query` for a statement alone, and for a transaction one pooled client
 * with BEGIN, the callback's statements, then COMMIT (ROLLBACK on an error). Like Prisma's interactive
 * transactions: a bounded wait for a connection (`maxWait`), a bounded transaction (`timeout`: past it, ROLLBACK
 * and the callback's later statements are refused), and nothing sent after the end (the fence).
 *
 * Structural: the library imports no driver; any `pg.Pool` fits.
 */
import type { PrismaClientLike, SqlExecutor } from '../stores/prisma-client.ts';
import { TransactionClosedError } from '../stores/transaction-fence.ts';

export interface PgQueryResultLike {
  rows: unknown[];
  rowCount: number | null;
}
export interface PgPoolClientLike {
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  release(destroy?: boolean | Error): void;
}
export interface PgPoolLike {
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  connect(): Promise<PgPoolClientLike>;
}

/** Prisma's defaults for an interactive transaction: 2 s to get a connection, 5 s to run. */
const DEFAULT_MAX_WAIT_MS = 2_000;
const DEFAULT_TIMEOUT_MS = 5_000;

export class PgTransactionTimeoutError extends Error {
  override readonly name = 'PgTransactionTimeoutError';
}

function executorOn(queryable: Pick<PgPoolLike, 'query'>, isOpen: () => boolean = () => true): SqlExecutor {
  const send = (sql: string, values: unknown[]) =>
    isOpen() ? queryable.query(sql, values) : Promise.reject(new TransactionClosedError());
  return {
    $queryRawUnsafe: async <T>(sql: string, ...values: unknown[]) => (await send(sql, values)).rows as T,
    $executeRawUnsafe: async (sql: string, ...values: unknown[]) => (await send(sql, values)).rowCount ?? 0,
  };
}

function within<T>(promise: Promise<T>, ms: number, error: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(error()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export type PgPoolExecutor = PrismaClientLike;

/** `pool` as the Postgres store's client. */
export function pgPoolExecutor(pool: PgPoolLike): PgPoolExecutor {
  const executor: PgPoolExecutor = {
    ...executorOn(pool),
    async $transaction<R>(
      fn: (tx: never) => Promise<R>,
      options: { maxWait?: number; timeout?: number } = {},
    ): Promise<R> {
      const connecting = pool.connect();
      const client = await within(
        connecting,
        options.maxWait ?? DEFAULT_MAX_WAIT_MS,
        () => new PgTransactionTimeoutError('No pooled connection within maxWait.'),
      ).catch((error: unknown) => {
        // A connection that arrives after the wait goes straight back.
        void connecting.then(
          (late) => late.release(),
          () => {},
        );
        throw error;
      });
      let open = true;
      let ended = false;
      try {
        await client.query('BEGIN');
        const result = await within(
          fn(executorOn(client, () => open) as never),
          options.timeout ?? DEFAULT_TIMEOUT_MS,
          () => new PgTransactionTimeoutError('The transaction ran past its timeout and was rolled back.'),
        );
        open = false;
        await client.query('COMMIT');
        ended = true;
        client.release();
        return result;
      } catch (error) {
        open = false;
        // A connection whose ROLLBACK failed is closed rather than handed back mid-transaction.
        const rolledBack =
          ended ||
          (await client.query('ROLLBACK').then(
            () => true,
            () => false,
          ));
        client.release(rolledBack ? undefined : true);
        throw error;
      }
    },
  };
  return executor;
}
