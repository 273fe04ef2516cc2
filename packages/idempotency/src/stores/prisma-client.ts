import type { IdempotencyStore } from '../core/store.ts';

/**
 * The slice of a Prisma client this store uses. Structural, so the library never imports an app's generated
 * client: any `PrismaClient` (v7, with a driver adapter) fits.
 */
export interface SqlExecutor {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
}

export interface PrismaClientLike extends SqlExecutor {
  $transaction<R>(
    fn: (tx: PrismaTransactionLike<this>) => Promise<R>,
    options?: { maxWait?: number; timeout?: number },
  ): Promise<R>;
}

/** What Prisma hands an interactive transaction: the client without its connection-level methods. */
export type PrismaTransactionLike<TClient> = Omit<
  TClient,
  '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'
>;

/**
 * A store factory on a Prisma client, or on a driver's executor of the same shape: the store's transactions are
 * the client's, so the procedure writes through the transaction the claim is in.
 */
export type StoreOnPrismaClient<TOptions> = <TClient extends PrismaClientLike>(
  db: TClient,
  options?: TOptions,
) => IdempotencyStore<PrismaTransactionLike<TClient>>;
