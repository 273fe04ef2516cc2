/** `.external()` end to end: tRPC's createCaller → middleware → Prisma store → Postgres. */
import type { Database } from '@idem/db';
import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type IdempotencyError, IdempotencyErrorCode, type IdempotencyOptions } from '../src/index.ts';
import type { PrismaStoreOptions } from '../src/prisma/index.ts';
import { ReplayedErrorCause } from '../src/trpc/index.ts';
import { connectWithOwnTable, deferred, waitUntil } from './support/db.ts';
import {
  createTestTRPC,
  freshIdentity,
  keyRows,
  requestContext,
  type TestContext,
  trpcFailure,
} from './support/trpc.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

/** A business error carrying its detail, as an app would throw it. */
class CardDeclinedError extends TRPCError {
  readonly reason: string;
  constructor(reason: string) {
    super({ code: 'PAYMENT_REQUIRED', message: 'The card was declined.' });
    this.reason = reason;
  }
}

type Input = { amount: number; currency: string; meta?: { a: number; b: number } };

/**
 * A router whose external mutation "charges a provider": it counts its executions (the outside effect) and
 * does what `behaviour` says for each attempt.
 */
function setup(
  behaviour: (attempt: number) => Promise<void> | void = () => {},
  options?: IdempotencyOptions,
  storeOptions?: PrismaStoreOptions,
) {
  const { t, idempotency, events } = createTestTRPC(db, undefined, { storeOptions });
  const charges: Array<{ key: string; scope: string; attempt: number }> = [];
  const router = t.router({
    pay: t.procedure
      .concat(idempotency.external(options))
      .input(
        z.object({
          amount: z.number().int().positive(),
          currency: z.string(),
          meta: z.object({ a: z.number(), b: z.number() }).optional(),
        }),
      )
      .mutation(async ({ ctx, input }) => {
        const attempt = charges.length + 1;
        charges.push({ key: ctx.idempotency.key, scope: ctx.idempotency.scope, attempt });
        await behaviour(attempt);
        return { chargeId: `ch_${attempt}`, amount: input.amount, at: new Date(), attempt };
      }),
    lookup: t.procedure.concat(idempotency.external()).query(() => 'never'),
  });
  const createCaller = t.createCallerFactory(router);
  const call = (ctx: TestContext, input: Input = { amount: 100, currency: 'EUR' }) =>
    createCaller(ctx).pay(input);
  return { call, charges, events, createCaller };
}

describe('external mode', () => {
  it('runs once and replays the stored output', async () => {
    const { principal, key } = freshIdentity();
    const { call, charges } = setup();
    const first = await call(requestContext(key, principal));
    const replayCtx = requestContext(key, principal);
    const replay = await call(replayCtx);
    expect(replay).toEqual(first);
    expect(replay.at).toBeInstanceOf(Date);
    expect(replayCtx.resHeaders.get('Idempotent-Replayed')).toBe('true');
    expect(charges).toEqual([{ key, scope: principal, attempt: 1 }]);
  });

  it('a duplicate while the first is running → 409 + Retry-After (control: after it finishes, replay)', async () => {
    const { principal, key } = freshIdentity();
    const gate = deferred();
    const { call, charges, events } = setup(async (attempt) => {
      if (attempt === 1) await gate.promise;
    });
    const firstCall = call(requestContext(key, principal));
    await waitUntil(() => charges.length === 1);

    const duplicateCtx = requestContext(key, principal);
    const conflict = await trpcFailure(call(duplicateCtx));
    expect(conflict.code).toBe('CONFLICT');
    expect((conflict.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.inProgress);
    expect((conflict.cause as IdempotencyError).httpStatus).toBe(409);
    expect(duplicateCtx.resHeaders.get('Retry-After')).toBe('1');

    gate.resolve();
    const first = await firstCall;
    const replayCtx = requestContext(key, principal);
    expect(await call(replayCtx)).toEqual(first);
    expect(replayCtx.resHeaders.get('Retry-After')).toBeNull();
    expect(charges).toHaveLength(1);
    expect(events.map((event) => event.outcome)).toEqual(['conflict', 'executed', 'replayed']);
  });

  it('with waitForInFlightMs, a duplicate waits for the first and replays it', async () => {
    const { principal, key } = freshIdentity();
    const gate = deferred();
    const { call, charges } = setup(
      async (attempt) => {
        if (attempt === 1) await gate.promise;
      },
      { waitForInFlightMs: 2_000 },
    );
    const firstCall = call(requestContext(key, principal));
    await waitUntil(() => charges.length === 1);
    const duplicateCtx = requestContext(key, principal);
    const duplicate = call(duplicateCtx);
    setTimeout(gate.resolve, 200);
    const [first, replay] = await Promise.all([firstCall, duplicate]);
    expect(replay).toEqual(first);
    expect(duplicateCtx.resHeaders.get('Idempotent-Replayed')).toBe('true');
    expect(charges).toHaveLength(1);
  });

  it('waitForInFlightMs is a bound: a first request slower than it still gets a 409', async () => {
    const { principal, key } = freshIdentity();
    const gate = deferred();
    const { call, charges } = setup(
      async (attempt) => {
        if (attempt === 1) await gate.promise;
      },
      { waitForInFlightMs: 300 },
    );
    const firstCall = call(requestContext(key, principal));
    await waitUntil(() => charges.length === 1);
    const startedAt = Date.now();
    const conflict = await trpcFailure(call(requestContext(key, principal)));
    expect(conflict.code).toBe('CONFLICT');
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(250);
    gate.resolve();
    await firstCall;
  });

  it('a stored business error is replayed with its code, message and detail', async () => {
    const { principal, key } = freshIdentity();
    const { call, charges } = setup(() => {
      throw new CardDeclinedError('insufficient_funds');
    });
    const first = await trpcFailure(call(requestContext(key, principal)));
    expect(first).toBeInstanceOf(CardDeclinedError);
    expect(first.code).toBe('PAYMENT_REQUIRED');

    const replayCtx = requestContext(key, principal);
    const replay = await trpcFailure(call(replayCtx));
    expect(replay.code).toBe('PAYMENT_REQUIRED');
    expect(replay.message).toBe(first.message);
    expect(replay.cause).toBeInstanceOf(ReplayedErrorCause);
    expect((replay.cause as ReplayedErrorCause).reason).toBe('insufficient_funds');
    expect(replayCtx.resHeaders.get('Idempotent-Replayed')).toBe('true');
    expect(charges).toHaveLength(1);
  });

  it('a transient error releases the key: the retry runs (two executions), then replays', async () => {
    const { principal, key } = freshIdentity();
    const { call, charges, events } = setup((attempt) => {
      if (attempt === 1) throw new TRPCError({ code: 'BAD_GATEWAY', message: 'provider 502' });
    });
    expect((await trpcFailure(call(requestContext(key, principal)))).code).toBe('BAD_GATEWAY');
    expect(await keyRows(db, principal)).toEqual([]);

    const retry = await call(requestContext(key, principal));
    expect(retry.attempt).toBe(2);
    expect(await call(requestContext(key, principal))).toEqual(retry);
    expect(charges.map((charge) => charge.attempt)).toEqual([1, 2]);
    expect(events.map((event) => event.outcome)).toEqual(['released', 'executed', 'replayed']);
  });

  it('zombie: a request that outlives its lease is fenced; the retry that took over is the stored result', async () => {
    const { principal, key } = freshIdentity();
    const gate = deferred();
    const { call, charges } = setup(
      async (attempt) => {
        if (attempt === 1) await gate.promise;
      },
      // Long enough that the control below always sees it live; the test ends it in the database.
      { leaseSeconds: 60 },
      // The lease must end while the first request still runs: renewal off, from the test side.
      { leaseRenewal: false },
    );
    const zombieCtx = requestContext(key, principal);
    const zombieCall = call(zombieCtx);
    await waitUntil(() => charges.length === 1);

    // Control: while the lease is live, a retry gets 409.
    expect((await trpcFailure(call(requestContext(key, principal)))).code).toBe('CONFLICT');
    // The lease ends: its end moves into the past (as if 60 s went by).
    expect(
      await db.$executeRawUnsafe(
        "update idempotency_keys set locked_until = now() - interval '1 second' where scope = $1",
        principal,
      ),
    ).toBe(1);

    const retry = await call(requestContext(key, principal));
    expect(retry.attempt).toBe(2);

    gate.resolve();
    const fenced = await trpcFailure(zombieCall);
    expect(fenced.code).toBe('CONFLICT');
    expect((fenced.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.leaseLost);
    expect(zombieCtx.resHeaders.get('Retry-After')).toBe('1');

    const replay = await call(requestContext(key, principal));
    expect(replay).toEqual(retry);
    expect(charges.map((charge) => charge.attempt)).toEqual([1, 2]);
  });

  it('a live request slower than its lease keeps its key: the store renews the lease (control: renewal off → a second run)', async () => {
    const outlive = async (storeOptions?: PrismaStoreOptions) => {
      const { principal, key } = freshIdentity();
      const gate = deferred();
      const { call, charges } = setup(
        async (attempt) => {
          if (attempt === 1) await gate.promise;
        },
        // Renewed every second: only a 3 s stall of this process could let a renewed lease end.
        { leaseSeconds: 3 },
        storeOptions,
      );
      const first = call(requestContext(key, principal));
      await waitUntil(() => charges.length === 1);
      // Until the database's clock is past the whole first lease (claimed plus 3 s), renewed or not.
      await waitUntil(async () => {
        const [row] = await db.$queryRawUnsafe<Array<{ over: boolean }>>(
          "select now() > created_at + interval '3.2 seconds' as over from idempotency_keys where scope = $1",
          principal,
        );
        return row?.over === true;
      }, 30_000);
      const retry = await call(requestContext(key, principal)).then(
        (result) => `ran attempt ${result.attempt}`,
        (error: unknown) => (error instanceof TRPCError ? error.code : String(error)),
      );
      gate.resolve();
      await first.catch(() => undefined);
      return { retry, executions: charges.length };
    };
    // Control: without renewal the lease ends under the running request and the retry runs it again.
    expect(await outlive({ leaseRenewal: false })).toEqual({ retry: 'ran attempt 2', executions: 2 });
    // Built in: the owner renews, the retry is told to wait, one execution.
    expect(await outlive()).toEqual({ retry: 'CONFLICT', executions: 1 });
  });

  it('another principal with the same key is independent', async () => {
    const { principal, key } = freshIdentity();
    const other = freshIdentity().principal;
    const { call, charges } = setup();
    const mine = await call(requestContext(key, principal));
    const theirsCtx = requestContext(key, other);
    const theirs = await call(theirsCtx);
    expect(theirs.attempt).toBe(2);
    expect(theirs.chargeId).not.toBe(mine.chargeId);
    expect(theirsCtx.resHeaders.get('Idempotent-Replayed')).toBeNull();
    expect(charges.map((charge) => charge.scope)).toEqual([principal, other]);
    // Each principal replays its own result.
    expect(await call(requestContext(key, principal))).toEqual(mine);
    expect(await call(requestContext(key, other))).toEqual(theirs);
  });

  it('the same input with reordered keys replays; a different input → 422 UNPROCESSABLE_CONTENT', async () => {
    const { principal, key } = freshIdentity();
    const { call, charges, events } = setup();
    const first = await call(requestContext(key, principal), {
      amount: 100,
      currency: 'EUR',
      meta: { a: 1, b: 2 },
    });
    const reordered = await call(requestContext(key, principal), {
      meta: { b: 2, a: 1 },
      currency: 'EUR',
      amount: 100,
    });
    expect(reordered).toEqual(first);

    const mismatchCtx = requestContext(key, principal);
    const mismatch = await trpcFailure(
      call(mismatchCtx, { amount: 101, currency: 'EUR', meta: { a: 1, b: 2 } }),
    );
    expect(mismatch.code).toBe('UNPROCESSABLE_CONTENT');
    expect((mismatch.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.keyReused);
    expect((mismatch.cause as IdempotencyError).httpStatus).toBe(422);
    expect(mismatchCtx.resHeaders.get('Idempotent-Replayed')).toBeNull();
    expect(charges).toHaveLength(1);
    expect(events.map((event) => event.outcome)).toEqual(['executed', 'replayed', 'mismatch']);
    // The mismatch changed nothing: the original still replays.
    expect(
      await call(requestContext(key, principal), { amount: 100, currency: 'EUR', meta: { a: 1, b: 2 } }),
    ).toEqual(first);
  });

  it('no principal → UNAUTHORIZED; no, malformed or batched key → BAD_REQUEST; nothing runs or is stored', async () => {
    const { principal, key } = freshIdentity();
    const { call, charges, events } = setup();

    const missing = await trpcFailure(call(requestContext(null, principal)));
    expect(missing.code).toBe('BAD_REQUEST');
    expect((missing.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.missingKey);

    const malformed = await trpcFailure(call(requestContext(`${key}, ${key}`, principal)));
    expect(malformed.code).toBe('BAD_REQUEST');
    expect((malformed.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.malformedKey);

    const batchedCtx = { ...requestContext(key, principal), batched: true };
    const batched = await trpcFailure(call(batchedCtx));
    expect(batched.code).toBe('BAD_REQUEST');
    expect((batched.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.batched);

    expect(charges).toHaveLength(0);
    expect(await keyRows(db, principal)).toEqual([]);
    expect(events.map((event) => event.outcome)).toEqual(['rejected', 'rejected', 'rejected']);

    expect((await trpcFailure(call(requestContext(key, null)))).code).toBe('UNAUTHORIZED');
    expect((await trpcFailure(call(requestContext(key, '')))).code).toBe('UNAUTHORIZED');
    expect(charges).toHaveLength(0);
    expect(await keyRows(db, principal)).toEqual([]);
    // Control: the same request, well-formed, runs.
    expect((await call(requestContext(key, principal))).attempt).toBe(1);
  });

  it('a query procedure using it throws (idempotency applies to mutations only)', async () => {
    const { principal, key } = freshIdentity();
    const { createCaller } = setup();
    const error = await trpcFailure(createCaller(requestContext(key, principal)).lookup());
    expect(error.code).toBe('INTERNAL_SERVER_ERROR');
    expect(error.message).toMatch(/mutations.*lookup is a query/);
    expect(await keyRows(db, principal)).toEqual([]);
  });
});
