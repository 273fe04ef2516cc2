/**
 * A node-postgres `Pool` as the client the Postgres store takes (`PrismaClientLike`): `pool.query` for a
 * statement alone, one pooled client per transaction — bounded and fenced as stores/pooled-executor.ts says.
 *
 * Structural: the library imports no driver; any `pg.Pool` fits.
 */

import { pooledExecutor } from '../stores/pooled-executor.ts';
import type { PrismaClientLike } from '../stores/prisma-client.ts';
import { CommitRolledBackError } from '../stores/transaction-fence.ts';

export interface PgQueryResultLike {
  rows: unknown[];
  rowCount: number | null;
  /** The command tag: 'ROLLBACK' for the COMMIT of a transaction a failed statement aborted. */
  command?: string;
}
/** What the store uses of a pooled `pg.PoolClient`: one transaction's statements, then its release. */
export interface PgPoolClientLike {
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  release(destroy?: boolean | Error): void;
}
/** What the store uses of a `pg.Pool`: a statement alone, or a client held for one transaction. */
export interface PgPoolLike {
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  connect(): Promise<PgPoolClientLike>;
}

/** A wait for a pooled client, or a transaction holding one, ran past its bound (`maxWait`, `timeout`). */
export class PgTransactionTimeoutError extends Error {
  override readonly name = 'PgTransactionTimeoutError';
}

/** The pool as the Postgres store's client: the Prisma client shape the stores take. */
export type PgPoolExecutor = PrismaClientLike;

/** `pool` as the Postgres store's client. */
export function pgPoolExecutor(pool: PgPoolLike): PgPoolExecutor {
  return pooledExecutor<PgPoolClientLike>({
    query: async (on, sql, values) => (await (on ?? pool).query(sql, values)).rows,
    execute: async (on, sql, values) => (await (on ?? pool).query(sql, values)).rowCount ?? 0,
    // Postgres answers the COMMIT of a transaction that a failed statement aborted with ROLLBACK, and no error
    // (a procedure that caught that statement's error and went on): nothing was committed.
    commit: async (client) => {
      if ((await client.query('COMMIT')).command === 'ROLLBACK') throw new CommitRolledBackError();
    },
    connect: () => pool.connect(),
    release: (client, destroy) => client.release(destroy || undefined),
    timeoutError: (message) => new PgTransactionTimeoutError(message),
  });
}
