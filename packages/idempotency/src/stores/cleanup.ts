import type { IdempotencyStore } from '../core/store.ts';

export interface CleanupResult {
  deleted: number;
  batches: number;
}

/**
 * Deletes expired keys in batches (short transactions, no long table lock), never a key whose lease is live.
 * Safe to run concurrently with itself and with live traffic.
 */
export async function cleanupExpiredKeys(
  store: Pick<IdempotencyStore<unknown>, 'deleteExpiredBatch'>,
  { batchSize = 10_000, maxBatches = Number.POSITIVE_INFINITY } = {},
): Promise<CleanupResult> {
  // A batch size of 0 (e.g. from an empty environment variable: Number('') = 0) would loop forever
  // (`count < batchSize` never holds); a negative or fractional one would only fail in SQL. Reject them up front.
  if (!Number.isSafeInteger(batchSize) || batchSize < 1)
    throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
  let deleted = 0;
  let batches = 0;
  while (batches < maxBatches) {
    const count = await store.deleteExpiredBatch(batchSize);
    batches += 1;
    deleted += count;
    if (count < batchSize) break;
  }
  return { deleted, batches };
}
