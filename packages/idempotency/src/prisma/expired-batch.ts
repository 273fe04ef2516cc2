/**
 * The batch delete of expired keys, shared by the store (`deleteExpiredBatch`) and the key operations
 * (`deleteExpired`, whose batches run in a transaction with the caller's per-batch callback).
 */
import type { SqlExecutor } from '../stores/prisma-client.ts';
import { quoteTable } from './sql.ts';

/** Deletes up to `batchSize` expired keys whose lease is not live, through `on`; returns how many. */
export type ExpiredBatchDelete = (on: SqlExecutor, batchSize: number) => Promise<number>;

/**
 * The delete names rows by `ctid`, which is unique only within one partition: on a partitioned key table it
 * would delete the same slot in every partition, live keys included. Partitioning this table is not supported
 * (a range on time also breaks the primary key: docs/SCALING.md), so the delete refuses one, checked once.
 */
export function expiredBatchDelete(tableName: string): ExpiredBatchDelete {
  const table = quoteTable(tableName);
  let partitionCheck: Promise<void> | null = null;
  // The check runs on the batch's own executor: inside a batch transaction, a query on another connection would
  // wait for the pool while the transaction holds it (with a pool of one, until the transaction times out).
  function refusePartitionedTable(on: SqlExecutor): Promise<void> {
    if (partitionCheck) return partitionCheck;
    const check = Promise.resolve(
      on.$queryRawUnsafe<Array<{ relkind: string }>>(
        'select relkind::text as relkind from pg_class where oid = $1::regclass',
        table,
      ),
    ).then((rows) => {
      if (rows[0]?.relkind === 'p')
        throw new Error(`${tableName} is partitioned: deleting expired keys supports a plain table only`);
    });
    // A failed check (connection lost) is tried again next time; a partitioned table fails every time.
    check.catch(() => {
      partitionCheck = null;
    });
    partitionCheck = check;
    return check;
  }

  return async (on, batchSize) => {
    await refusePartitionedTable(on);
    // SKIP LOCKED: two cleanups running at once split the work instead of waiting on each other.
    return on.$executeRawUnsafe(
      `delete from ${table} where ctid in (
         select ctid from ${table}
         where expires_at <= now() and not (state = 'processing' and locked_until > now())
         limit $1 for update skip locked)`,
      batchSize,
    );
  };
}
