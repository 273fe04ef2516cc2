/**
 * Issue 12, item 7: in transactional mode a decided business error (402) is recorded after its transaction
 * rolled back. That recording must not go through the per-principal in-flight cap: the request already passed
 * it when it claimed the key, and a 429 there answers "too many in flight" for a card that was declined, and
 * stores nothing (the next retry runs the procedure again).
 *
 * The cap fills up WHILE the procedure runs (the same principal starts external-mode requests elsewhere); the
 * procedure then declines the card.
 * CONTROL: the recording claim as the handler used to send it — with the cap — is refused with 429.
 * PROTECTED: the request answers 402, the key holds the 402, and a retry replays it (1 execution).
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import {
  type ClaimRequest,
  fingerprintRequest,
  IdempotencyError,
  IdempotencyErrorCode,
  type StoredResponse,
} from '@idem/idempotency';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, uniqueScope } from '../../packages/idempotency/test/support/db.ts';
import { TRPCError } from '../../packages/idempotency/test/support/server-peers.ts';
import {
  createTestTRPC,
  keyRows,
  requestContext,
  trpcFailure,
} from '../../packages/idempotency/test/support/trpc.ts';

const CAP = 2;

let db: Database;
beforeAll(() => {
  db = connect();
});
afterAll(async () => {
  await db.$disconnect();
});

function setup() {
  const { t, idempotency, store } = createTestTRPC(db, { maxInFlightPerScope: CAP });
  let executions = 0;
  /** The same principal's external-mode requests, claimed (live leases) while the transactional one runs. */
  const fillCap = async (scope: string) => {
    for (let index = 0; index < CAP; index += 1) {
      const claim = await store.claim(externalClaim(scope));
      expect(claim.claimed).toBe(true);
    }
  };
  const router = t.router({
    pay: t.procedure.concat(idempotency.transactional()).mutation(async ({ ctx }) => {
      executions += 1;
      await fillCap(ctx.idempotency.scope);
      throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Your card was declined.' });
    }),
  });
  return {
    store,
    caller: (key: string, scope: string) => router.createCaller(requestContext(key, scope)),
    executions: () => executions,
    fillCap,
  };
}

function externalClaim(scope: string): ClaimRequest {
  return {
    scope,
    procedure: 'elsewhere.charge',
    key: randomUUID(),
    fingerprint: fingerprintRequest('elsewhere.charge', null),
    owner: randomUUID(),
    leaseSeconds: 60,
    retentionSeconds: 3_600,
    inFlightCap: { max: CAP, retryAfterSeconds: 1 },
  };
}

describe('transactional mode: a decided error is recorded whatever the in-flight count', () => {
  it('CONTROL: recording the 402 through the capped claim (the old path) is refused with 429, nothing stored', async () => {
    const { store, fillCap } = setup();
    const scope = uniqueScope();
    await fillCap(scope);
    const declined: StoredResponse = {
      kind: 'error',
      httpStatus: 402,
      code: 'PAYMENT_REQUIRED',
      message: 'Your card was declined.',
    };
    const recording: ClaimRequest = {
      scope,
      procedure: 'pay',
      key: randomUUID(),
      fingerprint: fingerprintRequest('pay', null),
      owner: randomUUID(),
      leaseSeconds: 15,
      retentionSeconds: 3_600,
      inFlightCap: { max: CAP, retryAfterSeconds: 1 },
      response: declined,
    };
    const refusal = await store
      .transaction((tx) => store.claim(recording, tx), { lockTimeoutMs: 1_000, timeoutMs: 5_000 })
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(refusal).toBeInstanceOf(IdempotencyError);
    expect((refusal as IdempotencyError).code).toBe(IdempotencyErrorCode.tooManyInFlight);
    expect((refusal as IdempotencyError).httpStatus).toBe(429);
    expect((await keyRows(db, scope)).filter((row) => row.procedure === 'pay')).toEqual([]);
  });

  it('PROTECTED: the request answers 402, the 402 is stored, and the retry replays it (1 execution)', async () => {
    const { caller, executions } = setup();
    const scope = uniqueScope();
    const key = randomUUID();

    const first = await trpcFailure(caller(key, scope).pay());
    expect(first.code).toBe('PAYMENT_REQUIRED');
    expect(first.message).toBe('Your card was declined.');

    const stored = (await keyRows(db, scope)).filter((row) => row.procedure === 'pay');
    expect(stored).toHaveLength(1);
    expect(stored[0]?.state).toBe('completed');
    expect(JSON.parse(stored[0]?.response ?? 'null')).toMatchObject({
      httpStatus: 402,
      code: 'PAYMENT_REQUIRED',
    });

    const retry = await trpcFailure(caller(key, scope).pay());
    expect(retry.code).toBe('PAYMENT_REQUIRED');
    expect(executions()).toBe(1);
  });
});
