/**
 * Adapts a Prisma interactive transaction to pg-boss's `Db`, so `boss.send(…, { db })` inserts the job with
 * the caller's other writes, in the same transaction.
 */
import type { Db } from 'pg-boss';

/** The one method used, structurally: any Prisma 7 client or `$transaction` client fits. */
export interface RawQueryable {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
}

export function prismaTransactionDb(tx: RawQueryable): Db {
  return {
    async executeSql(text: string, values: unknown[] = []) {
      const rows = await tx.$queryRawUnsafe<Record<string, unknown>[]>(text, ...values.map(toSqlValue));
      return { rows };
    },
  };
}

/**
 * pg-boss relies on node-postgres serialising a plain object (the job data, a `$3::jsonb` parameter) as JSON.
 * Prisma 7 happens to do the same today; stringifying here keeps it from depending on that. Arrays (`uuid[]`
 * parameters: Prisma passes them as Postgres arrays), dates and buffers pass through unchanged.
 */
function toSqlValue(value: unknown): unknown {
  if (value === undefined) return null;
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value) || value instanceof Date || ArrayBuffer.isView(value)) return value;
  return JSON.stringify(value);
}
