/**
 * @idem/idempotency/mariadb — the key table on MariaDB (InnoDB; tested on 10.11) through any Prisma 7 client on
 * `@prisma/adapter-mariadb`, or on a plain `mariadb` connector pool (`createMariadbPoolIdempotencyStore`, no
 * Prisma): the store the adapters claim with, and the table's schema.
 */

export { type CleanupResult, cleanupExpiredKeys } from '../stores/cleanup.ts';
export type { PrismaClientLike, PrismaTransactionLike, SqlExecutor } from '../stores/prisma-client.ts';
export { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
export {
  CommitRolledBackError,
  TransactionClosedError,
  withTransactionFence,
} from '../stores/transaction-fence.ts';
export {
  MariadbIdempotencyTableMissingError,
  MariadbKeyColumnTooLongError,
  MariadbResponseTooLargeError,
} from './errors.ts';
export {
  createMariadbPoolIdempotencyStore,
  type MariadbConnectionLike,
  type MariadbFieldLike,
  type MariadbPoolExecutor,
  type MariadbPoolLike,
  type MariadbQueryOptionsLike,
  MariadbTransactionTimeoutError,
  mariadbPoolExecutor,
} from './pool-executor.ts';
export { type MariadbIdempotencyKeysSchema, mariadbIdempotencyKeysSchema } from './schema.ts';
export { MARIADB_KEY_COLUMN_BYTES, MARIADB_RESPONSE_BYTES } from './sql.ts';
export { createMariadbIdempotencyStore, type MariadbStoreOptions } from './store.ts';
