/**
 * @idem/idempotency/sqlite — the key table on SQLite through any Prisma 7 client on Prisma's better-sqlite3
 * adapter: the store the tRPC adapter claims with, and the table's schema (DDL and Prisma model).
 */

export { type CleanupResult, cleanupExpiredKeys } from '../stores/cleanup.ts';
export type { PrismaClientLike, PrismaTransactionLike, SqlExecutor } from '../stores/prisma-client.ts';
export { TransactionClosedError, withTransactionFence } from '../stores/transaction-fence.ts';
export { type SqliteIdempotencyKeysSchema, sqliteIdempotencyKeysSchema } from './schema.ts';
export { DEFAULT_SQLITE_IDEMPOTENCY_TABLE } from './sql.ts';
export {
  createSqliteIdempotencyStore,
  SqliteIdempotencyTableMissingError,
  type SqliteStoreOptions,
} from './store.ts';
