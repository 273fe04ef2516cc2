/**
 * An experiment, not a store: the idempotency store's interface with no SQL behind it — every claim is granted,
 * every completion accepted, nothing is written or read, and the transaction is the handler's own Prisma
 * `$transaction`, exactly as the unprotected route opens it. Behind Idem's middleware (`bench.protectedWithoutSql`)
 * it times what the library's JavaScript costs at load on its own, so that the peers table can split Idem's
 * throughput ratio into its JavaScript and its SQL. It protects nothing (a duplicate runs again): it is never a
 * contender, never probed for correctness, and it lives in the bench only.
 */
import type { Database } from '@idem/db';
import type { IdempotencyStore } from '@idem/idempotency';
import type { PrismaTransactionLike } from '@idem/idempotency/prisma';

type Tx = PrismaTransactionLike<Database>;

export function storeWithoutSql(db: Database): IdempotencyStore<Tx> {
  return {
    answersDuplicatesAtClaim: true,
    claim: async () => ({ claimed: true, takeover: false }),
    complete: async () => true,
    release: async () => true,
    find: async () => null,
    countReplay: async () => {},
    // The Prisma store's own transaction options, without its fast path: the unprotected route's transaction.
    transaction: (fn, { timeoutMs, lockTimeoutMs }) =>
      db.$transaction((tx) => fn(tx), { maxWait: timeoutMs, timeout: timeoutMs + lockTimeoutMs }),
    isLockTimeout: () => false,
    deleteExpiredBatch: async () => 0,
  };
}
