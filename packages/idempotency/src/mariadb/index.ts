/**
 * @idem/idempotency/mariadb — the key table on MariaDB (InnoDB; tested on 10.11) through any Prisma 7 client on
 * `@prisma/adapter-mariadb`: the store the tRPC adapter claims with, and the table's schema.
 */

export { type CleanupResult, cleanupExpiredKeys } from '../prisma/cleanup.ts';
export type { PrismaClientLike, PrismaTransactionLike, SqlExecutor } from '../prisma/client.ts';
export { DEFAULT_IDEMPOTENCY_TABLE } from '../prisma/sql.ts';
export { TransactionClosedError, withTransactionFence } from '../prisma/transaction-fence.ts';
export {
  MariadbIdempotencyTableMissingError,
  MariadbKeyColumnTooLongError,
  MariadbResponseTooLargeError,
} from './errors.ts';
export { type MariadbIdempotencyKeysSchema, mariadbIdempotencyKeysSchema } from './schema.ts';
export { MARIADB_KEY_COLUMN_BYTES, MARIADB_RESPONSE_BYTES } from './sql.ts';
export { createMariadbIdempotencyStore, type MariadbStoreOptions } from './store.ts';
