/**
 * Issue 12, item 9e (suspected: "waitWhileInFlight waits out its whole deadline on a dead lease"). Confirmed:
 * a duplicate that waits for an in-flight key (`waitForInFlightMs`) kept polling while the key stayed
 * `processing`, without looking at the owner's lease; when the owner had died, it slept to its deadline and
 * then answered 409.
 *
 * The owner claims the key and dies (never completes). A duplicate of the same request waits on it; once it has
 * read the key in flight, the owner's lease ends (the test moves `locked_until` into the past, as the database's
 * clock passing it would: the store compares `locked_until > now()`).
 * CONTROL: a store whose re-reads do not show the lease ending (what the wait loop looked at) → the duplicate
 * sleeps its whole deadline (4 s) and answers 409, nothing ran.
 * PROTECTED: the duplicate sees the lease end, takes the key over and runs the procedure once → 200, long before
 * its deadline (20 s here, so that a loaded machine cannot turn a late takeover into a 409).
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { fingerprintRequest } from '@idem/idempotency';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, uniqueScope, waitUntil } from '../../packages/idempotency/test/support/db.ts';
import {
  createTestTRPC,
  keyRows,
  requestContext,
  trpcFailure,
} from '../../packages/idempotency/test/support/trpc.ts';

/** The dead owner's lease: it does not end by itself during a test; the test ends it (`leaseEnds`). */
const LEASE_SECONDS = 60;
/** The control's wait: it sleeps all of it. */
const CONTROL_WAIT_MS = 4_000;
const PROTECTED_WAIT_MS = 20_000;

let db: Database;
beforeAll(() => {
  db = connect();
});
afterAll(async () => {
  await db.$disconnect();
});

function setup({ blindToLeaseEnd, waitMs }: { blindToLeaseEnd: boolean; waitMs: number }) {
  let reads = 0;
  const { t, idempotency, store } = createTestTRPC(
    db,
    { leaseSeconds: LEASE_SECONDS, waitForInFlightMs: waitMs },
    {
      wrapStore: (inner) => ({
        ...inner,
        // The wait loop's re-reads: counted, and in the control blind to the lease ending.
        find: async (key) => {
          const record = await inner.find(key);
          reads += 1;
          return blindToLeaseEnd && record ? { ...record, leaseActive: true } : record;
        },
      }),
    },
  );
  let executions = 0;
  const router = t.router({
    pay: t.procedure.concat(idempotency.external()).mutation(() => {
      executions += 1;
      return { paid: true };
    }),
  });
  /** The first request: claims the key, then its process dies (no completion, no release). */
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
    reads: () => reads,
  };
}

/** Once the duplicate has read the key in flight (it is waiting), the dead owner's lease ends. */
async function leaseEndsWhileWaiting(scope: string, reads: () => number) {
  await waitUntil(() => reads() > 0, 20_000);
  const ended = await db.$executeRawUnsafe(
    "update idempotency_keys set locked_until = now() - interval '1 second' where scope = $1 and state = 'processing'",
    scope,
  );
  expect(ended).toBe(1);
}

describe('a duplicate waiting on an in-flight key whose owner died', () => {
  it('CONTROL: blind to the lease ending, it sleeps its whole deadline (4 s) and answers 409', async () => {
    const { ownerDies, duplicate, executions, reads } = setup({
      blindToLeaseEnd: true,
      waitMs: CONTROL_WAIT_MS,
    });
    const scope = uniqueScope();
    const key = randomUUID();
    expect(await ownerDies(scope, key)).toEqual({ claimed: true, takeover: false });

    const started = Date.now();
    const answer = trpcFailure(duplicate(scope, key));
    await leaseEndsWhileWaiting(scope, reads);
    const error = await answer;
    const elapsedMs = Date.now() - started;
    expect(error.code).toBe('CONFLICT');
    expect(elapsedMs).toBeGreaterThanOrEqual(CONTROL_WAIT_MS);
    expect(executions()).toBe(0);
  });

  it('PROTECTED: it takes the key over once the lease ends and runs the procedure once → 200', async () => {
    const { ownerDies, duplicate, executions, reads } = setup({
      blindToLeaseEnd: false,
      waitMs: PROTECTED_WAIT_MS,
    });
    const scope = uniqueScope();
    const key = randomUUID();
    expect(await ownerDies(scope, key)).toEqual({ claimed: true, takeover: false });

    const answer = duplicate(scope, key);
    await leaseEndsWhileWaiting(scope, reads);
    // It waited while the lease was live: nothing ran before the lease ended.
    expect(executions()).toBe(0);
    expect(await answer).toEqual({ paid: true });
    expect(executions()).toBe(1);
    const [row] = await keyRows(db, scope);
    expect(row?.state).toBe('completed');
    // Its retry replays the stored result.
    expect(await duplicate(scope, key)).toEqual({ paid: true });
    expect(executions()).toBe(1);
  });
});
