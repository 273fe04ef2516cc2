/**
 * A `mariadb` connector `Pool` as the client the MariaDB store takes (`PrismaClientLike`): `pool.query` for a
 * statement alone, one pooled connection per transaction — bounded and fenced as stores/pooled-executor.ts says.
 *
 * Two things of the connector's defaults would change what the store reads, so each statement says its own:
 * times (the store writes UTC_TIMESTAMP(6) into DATETIME columns, which the connector would read as the
 * process's local time: off by its zone's offset anywhere but UTC) are read as UTC; counts come back as numbers.
 * The store counts matched rows for an UPDATE: keep the connector's `foundRows` at its default (true).
 *
 * Structural: the library imports no driver; any `mariadb` 3 `Pool` fits.
 */

import { pooledExecutor } from '../stores/pooled-executor.ts';
import type { PrismaClientLike } from '../stores/prisma-client.ts';
import { createMariadbIdempotencyStore, type MariadbStoreOptions } from './store.ts';

/** The column a `typeCast` is asked about (the connector's `FieldInfo`, the part read here). */
export interface MariadbFieldLike {
  type: string;
  string(): string | null;
}
export interface MariadbQueryOptionsLike {
  sql: string;
  typeCast: <TDecoded>(
    field: MariadbFieldLike,
    next: () => TDecoded,
  ) => TDecoded | Date | string | number | null;
  bigIntAsNumber: boolean;
}
/** What the store uses of a pooled `mariadb` connection: one transaction's statements, then its release. */
export interface MariadbConnectionLike {
  query(options: MariadbQueryOptionsLike, values?: unknown[]): Promise<unknown>;
  release(): Promise<void> | void;
  destroy(): Promise<void> | void;
}
/** What the store uses of a `mariadb` connector `Pool`: a statement alone, or a connection for a transaction. */
export interface MariadbPoolLike {
  query(options: MariadbQueryOptionsLike, values?: unknown[]): Promise<unknown>;
  getConnection(): Promise<MariadbConnectionLike>;
}

/** A wait for a pooled connection, or a transaction holding one, ran past its bound (`maxWait`, `timeout`). */
export class MariadbTransactionTimeoutError extends Error {
  override readonly name = 'MariadbTransactionTimeoutError';
}

/** The pool as the MariaDB store's client: the Prisma client shape the stores take. */
export type MariadbPoolExecutor = PrismaClientLike;

/**
 * A DATETIME or TIMESTAMP as the UTC instant the store wrote ('YYYY-MM-DD HH:MM:SS[.ffffff]'); a BIGINT as a
 * number while it is one exactly, else a bigint (never rounded: an app's own ids past 2^53 read through `tx`).
 */
function decoded<TDecoded>(
  field: MariadbFieldLike,
  next: () => TDecoded,
): TDecoded | Date | string | number | null {
  if (field.type === 'BIGINT') {
    const text = field.string();
    if (text === null) return null;
    const value = Number(text);
    return Number.isSafeInteger(value) ? value : text;
  }
  if (field.type !== 'DATETIME' && field.type !== 'TIMESTAMP') return next();
  const text = field.string();
  if (text === null) return null;
  const time = new Date(`${text.replace(' ', 'T')}Z`);
  // A zero date ('0000-00-00 …', allowed without NO_ZERO_DATE): null, as the connector itself reads it.
  return Number.isNaN(time.getTime()) ? null : time;
}

/**
 * A Date sent as the UTC text the reads above take it for: the connector would write it in the process's zone,
 * and a Date written through `tx` would read back off by the zone's offset.
 */
const bound = (values: unknown[]) =>
  values.map((value) =>
    value instanceof Date && !Number.isNaN(value.getTime())
      ? value.toISOString().replace('T', ' ').replace('Z', '')
      : value,
  );

const options = (sql: string): MariadbQueryOptionsLike => ({ sql, typeCast: decoded, bigIntAsNumber: true });

/** Rows of a result set (the connector adds a `meta` property to the array: dropped), or none for an OK. */
const rowsOf = (result: unknown): unknown[] => (Array.isArray(result) ? [...result] : []);
/** An OK packet's affected (matched, with foundRows) rows; a result set's length. */
const countOf = (result: unknown): number =>
  Array.isArray(result)
    ? result.length
    : Number((result as { affectedRows?: number | bigint }).affectedRows ?? 0);

/** `pool` as the MariaDB store's client. */
export function mariadbPoolExecutor(pool: MariadbPoolLike): MariadbPoolExecutor {
  return pooledExecutor<MariadbConnectionLike>({
    query: async (on, sql, values) => rowsOf(await (on ?? pool).query(options(sql), bound(values))),
    execute: async (on, sql, values) => countOf(await (on ?? pool).query(options(sql), bound(values))),
    // InnoDB rolls a deadlock victim's whole transaction back, and the session is then in autocommit.
    inTransaction: async (connection) => {
      const [row] = rowsOf(await connection.query(options('SELECT @@in_transaction AS open'))) as Array<{
        open: number;
      }>;
      return Number(row?.open) === 1;
    },
    connect: () => pool.getConnection(),
    release: (connection, destroy) => void (destroy ? connection.destroy() : connection.release()),
    timeoutError: (message) => new MariadbTransactionTimeoutError(message),
  });
}

/** The MariaDB store on a `mariadb` connector pool: the same table, SQL and guarantees as on Prisma. */
export function createMariadbPoolIdempotencyStore(pool: MariadbPoolLike, options: MariadbStoreOptions = {}) {
  return createMariadbIdempotencyStore(mariadbPoolExecutor(pool), options);
}
