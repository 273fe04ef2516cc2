/**
 * @idem/idempotency/prisma — the Postgres key table through any Prisma 7 client: the store the tRPC adapter
 * claims with, the operations that admin tools, metrics and cleanup jobs use, and the table's schema.
 */

export { type CleanupResult, cleanupExpiredKeys } from '../stores/cleanup.ts';
export type { PrismaClientLike, PrismaTransactionLike, SqlExecutor } from '../stores/prisma-client.ts';
export { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
export {
  CommitRolledBackError,
  TransactionClosedError,
  withTransactionFence,
} from '../stores/transaction-fence.ts';
export { wrapTransactions } from '../stores/wrap-transactions.ts';
export {
  EVICTED_KEYS_CHANNEL,
  evictionNotice,
  forgetEvictedKeys,
  type NotificationClient,
} from './evicted-keys.ts';
export { type FastPathOptions, type WithFastPath, withIdempotencyFastPath } from './fast-path/adapter.ts';
export { IdempotencyTableMissingError } from './missing-table.ts';
export {
  createIdempotencyKeyOperations,
  type DeleteExpiredOptions,
  type Eviction,
  type EvictionRule,
  type EvictRequest,
  type EvictResult,
  type FindKeysOptions,
  type IdempotencyKeyOperations,
  type IdempotencyKeyRow,
  type KeyCounts,
  type KeyFilter,
  type KeyOperationsOptions,
  type KeyStatus,
} from './operations.ts';
export { type IdempotencyKeysSchema, idempotencyKeysSchema } from './schema.ts';
export { idempotencyStatementName } from './statement-names.ts';
export { createPrismaIdempotencyStore, type PrismaStoreOptions } from './store.ts';
