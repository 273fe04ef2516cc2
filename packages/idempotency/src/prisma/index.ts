/** @idem/idempotency/prisma — the Postgres store, through any Prisma 7 client. */

export { type CleanupResult, cleanupExpiredKeys } from './cleanup.ts';
export type { PrismaClientLike, PrismaTransactionLike, SqlExecutor } from './client.ts';
export { withLeaseRenewal } from './lease.ts';
export { createPrismaIdempotencyStore, type PrismaStoreOptions } from './store.ts';
