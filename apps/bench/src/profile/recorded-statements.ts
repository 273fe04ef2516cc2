/**
 * The exact SQL the Prisma store sends for a transactional first execution (claim, completion), recorded by
 * running the real store against a recording executor — so the SQL arms of the profile replay the store's own
 * statements, not a copy that could drift.
 */
import { createPrismaIdempotencyStore, type PrismaClientLike } from '@idem/idempotency/prisma';

interface Recorded {
  sql: string;
  params: unknown[];
}

export interface IdemStatements {
  claim: string;
  complete: string;
  claimParams(scope: string, procedure: string, key: string): unknown[];
  completeParams(scope: string, procedure: string, key: string): unknown[];
}

export async function recordedStatements(): Promise<IdemStatements> {
  const recorded: Recorded[] = [];
  const executor = {
    $queryRawUnsafe: async (sql: string, ...params: unknown[]) => {
      recorded.push({ sql, params });
      return [{ inserted: true }];
    },
    $executeRawUnsafe: async (sql: string, ...params: unknown[]) => {
      recorded.push({ sql, params });
      return 1;
    },
  };
  const db = {
    ...executor,
    $transaction: (fn: (tx: typeof executor) => Promise<unknown>) => fn(executor),
  } as unknown as PrismaClientLike;
  const store = createPrismaIdempotencyStore(db);
  const key = { scope: 'S', procedure: 'P', key: 'K' };
  await store.transaction(
    async (tx) => {
      await store.claim(
        {
          ...key,
          fingerprint: 'f'.repeat(64),
          owner: '00000000-0000-4000-8000-000000000001',
          leaseSeconds: 30,
          retentionSeconds: 86_400,
          inFlightCap: { max: 100, retryAfterSeconds: 1 },
        },
        tx,
      );
      await store.complete(
        key,
        '00000000-0000-4000-8000-000000000001',
        { kind: 'output', httpStatus: 200, body: '{"id":1,"at":"2026-12-01T00:00:00.000Z"}' },
        tx,
      );
    },
    { lockTimeoutMs: 5_000, timeoutMs: 30_000 },
  );
  const [claim, complete] = recorded;
  if (!claim || !complete) throw new Error('the store sent fewer statements than a claim and a completion');
  // $1–$3 are the key; every other parameter (the owner included: one fixed owner fences its own claim, since
  // every key is new) is sent as recorded.
  const withKey = (params: unknown[], scope: string, procedure: string, k: string) => [
    scope,
    procedure,
    k,
    ...params.slice(3),
  ];
  return {
    claim: claim.sql,
    complete: complete.sql,
    claimParams: (scope, procedure, k) => withKey(claim.params, scope, procedure, k),
    completeParams: (scope, procedure, k) => withKey(complete.params, scope, procedure, k),
  };
}
