/**
 * @idem/idempotency/pg — the Postgres store on a plain node-postgres `Pool`, for an app without Prisma (Express,
 * Hono, …): the same table, SQL and guarantees as `./prisma`'s store, through `pgPoolExecutor(pool)`.
 */

export { type CleanupResult, cleanupExpiredKeys } from '../stores/cleanup.ts';
export { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
export { CommitRolledBackError, TransactionClosedError } from '../stores/transaction-fence.ts';
export {
  type PgPoolClientLike,
  type PgPoolExecutor,
  type PgPoolLike,
  type PgQueryResultLike,
  PgTransactionTimeoutError,
  pgPoolExecutor,
} from './pool-executor.ts';
export { createPgIdempotencyStore, type PgStoreOptions } from './store.ts';
