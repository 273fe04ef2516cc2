/** The Postgres store on a node-postgres `Pool`: the Prisma store's SQL, sent through `pgPoolExecutor`. */
import { createPrismaIdempotencyStore, type PrismaStoreOptions } from '../prisma/store.ts';
import { type PgPoolLike, pgPoolExecutor } from './pool-executor.ts';

/** The Prisma store's options but the fast path (this store has no Prisma underneath). */
export type PgStoreOptions = Omit<PrismaStoreOptions, 'fastPath'>;

export function createPgIdempotencyStore(pool: PgPoolLike, options: PgStoreOptions = {}) {
  return createPrismaIdempotencyStore(pgPoolExecutor(pool), options);
}
