/**
 * @idem/idempotency/sqlite — the key table on SQLite: the store on any Prisma 7 client on Prisma's better-sqlite3
 * adapter, or on a plain better-sqlite3 `Database` (`createBetterSqliteIdempotencyStore`, no Prisma), and the
 * table's schema (DDL and Prisma model).
 */

export { type CleanupResult, cleanupExpiredKeys } from '../stores/cleanup.ts';
export type { PrismaClientLike, PrismaTransactionLike, SqlExecutor } from '../stores/prisma-client.ts';
export { TransactionClosedError, withTransactionFence } from '../stores/transaction-fence.ts';
export {
  createBetterSqliteIdempotencyStore,
  type SqliteDatabaseExecutor,
  type SqliteDatabaseLike,
  type SqliteStatementLike,
  SqliteTransactionTimeoutError,
  sqliteDatabaseExecutor,
} from './database-executor.ts';
export { type SqliteIdempotencyKeysSchema, sqliteIdempotencyKeysSchema } from './schema.ts';
export { DEFAULT_SQLITE_IDEMPOTENCY_TABLE, SqliteConnectionWaitError } from './sql.ts';
export {
  createSqliteIdempotencyStore,
  SqliteIdempotencyTableMissingError,
  type SqliteStoreOptions,
} from './store.ts';
