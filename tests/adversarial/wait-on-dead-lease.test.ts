/**
 * Issue 12, item 9e (suspected: "waitWhileInFlight waits out its whole deadline on a dead lease"). Confirmed:
 * a duplicate that waits for an in-flight key (`waitForInFlightMs`) kept polling while the key stayed
 * `processing`, without looking at the owner's lease; when the owner had died, it slept to its deadline and
 * then answered 409.
 *
 * The owner claims the key with a 1 s lease and dies (never completes). A duplicate of the same request waits
 * up to 4 s.
 * CONTROL: a store whose re-reads do not show the lease ending (what the wait loop looked at) → the duplicate
 * sleeps its whole 4 s and answers 409, nothing ran.
 * PROTECTED: the duplicate sees the lease end (~1 s), takes the key over and runs the procedure once → 200.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { fingerprintRequest } from '@idem/idempotency';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, uniqueScope } from '../../packages/idempotency/test/support/db.ts';
import {
  createTestTRPC,
  keyRows,
  requestContext,
  trpcFailure,
} from '../../packages/idempotency/test/support/trpc.ts';

const LEASE_SECONDS = 1;
const WAIT_MS = 4_000;

let db: Database;
beforeAll(() => {
  db = connect();
});
afterAll(async () => {
  await db.$disconnect();
});

function setup({ blindToLeaseEnd }: { blindToLeaseEnd: boolean }) {
  const { t, idempotency, store } = createTestTRPC(
    db,
    { leaseSeconds: LEASE_SECONDS, waitForInFlightMs: WAIT_MS },
    {
      wrapStore: (inner) =>
        blindToLeaseEnd
          ? {
              ...inner,
              find: async (key) => {
                const record = await inner.find(key);
                return record && { ...record, leaseActive: true };
              },
            }
          : inner,
    },
  );
  let executions = 0;
  const router = t.router({
    pay: t.procedure.concat(idempotency.external()).mutation(() => {
      executions += 1;
      return { paid: true };
    }),
  });
  /** The first request: claims the key under a 1 s lease, then its process dies (no completion, no release). */
  const ownerDies = (scope: string, key: string) =>
    store.claim({
      scope,
      procedure: 'pay',
      key,
      fingerprint: fingerprintRequest('pay', null),
      owner: randomUUID(),
      leaseSeconds: LEASE_SECONDS,
      retentionSeconds: 3_600,
    });
  return {
    ownerDies,
    duplicate: (scope: string, key: string) => router.createCaller(requestContext(key, scope)).pay(),
    executions: () => executions,
  };
}

describe('a duplicate waiting on an in-flight key whose owner died', () => {
  it('CONTROL: blind to the lease ending, it sleeps its whole deadline (4 s) and answers 409', async () => {
    const { ownerDies, duplicate, executions } = setup({ blindToLeaseEnd: true });
    const scope = uniqueScope();
    const key = randomUUID();
    expect(await ownerDies(scope, key)).toEqual({ claimed: true, takeover: false });

    const started = Date.now();
    const error = await trpcFailure(duplicate(scope, key));
    const elapsedMs = Date.now() - started;
    expect(error.code).toBe('CONFLICT');
    expect(elapsedMs).toBeGreaterThanOrEqual(WAIT_MS);
    expect(executions()).toBe(0);
  });

  it('PROTECTED: it takes the key over once the lease ends (~1 s) and runs the procedure once → 200', async () => {
    const { ownerDies, duplicate, executions } = setup({ blindToLeaseEnd: false });
    const scope = uniqueScope();
    const key = randomUUID();
    expect(await ownerDies(scope, key)).toEqual({ claimed: true, takeover: false });

    const started = Date.now();
    expect(await duplicate(scope, key)).toEqual({ paid: true });
    const elapsedMs = Date.now() - started;
    // Timed from when the dead owner's claim returned, not from the claim itself (its lease started a little
    // earlier, by as much as a busy machine delays that return): wide enough for other test files running beside.
    expect(elapsedMs).toBeGreaterThanOrEqual(LEASE_SECONDS * 1_000 - 400);
    expect(elapsedMs).toBeLessThan(WAIT_MS - 1_000);
    expect(executions()).toBe(1);
    const [row] = await keyRows(db, scope);
    expect(row?.state).toBe('completed');
    // Its retry replays the stored result.
    expect(await duplicate(scope, key)).toEqual({ paid: true });
    expect(executions()).toBe(1);
  });
});
