/**
 * Transactional mode on a busy pool (issue 29, item 4; issue 27 item 5 suspected it): when the request's
 * transaction cannot open — every pooled connection held past `transactionTimeoutMs` (Prisma's `maxWait`) —
 * nothing has been claimed or run, yet the request was answered 500. It is now 503
 * `idempotency_store_unavailable` with `Retry-After`, the database's error kept as the cause for the server's
 * logs; the retry with the same key, once a connection is free, runs once. The CONTROL shows the fault itself:
 * the same held pool makes a plain `$transaction` fail with Prisma's P2028, what the adapter used to pass on.
 */
import type { Database } from '@idem/db';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { IdempotencyError, IdempotencyErrorCode } from '../src/index.ts';
import { connectWithOwnTable } from './support/db.ts';
import { createTestTRPC, freshIdentity, keyRows, requestContext, trpcFailure } from './support/trpc.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable(1);
});
afterAll(async () => {
  await db.$disconnect();
});

/** Takes the pool's one connection in a transaction until `release()`. */
async function holdThePool() {
  let release!: () => void;
  let holding!: () => void;
  const held = new Promise<void>((resolve) => {
    holding = resolve;
  });
  const done = db.$transaction(
    async (tx) => {
      await tx.$queryRawUnsafe('select 1');
      holding();
      await new Promise<void>((resolve) => {
        release = resolve;
      });
    },
    { maxWait: 10_000, timeout: 60_000 },
  );
  await held;
  return async () => {
    release();
    await done;
  };
}

it('CONTROL: with the one connection held, a plain $transaction fails to start (P2028)', async () => {
  const release = await holdThePool();
  try {
    const error = await db
      .$transaction(async () => 'never', { maxWait: 300 })
      .catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'P2028' });
  } finally {
    await release();
  }
});

it('a transaction that cannot open → 503 + Retry-After, nothing claimed or run; the same key then runs once', async () => {
  const { t, idempotency } = createTestTRPC(db, { transactionTimeoutMs: 300, retryAfterSeconds: 2 });
  let executions = 0;
  const router = t.router({
    create: t.procedure
      .concat(idempotency.transactional())
      .input(z.object({ sku: z.string() }))
      .mutation(() => {
        executions += 1;
        return { created: executions };
      }),
  });
  const { principal, key } = freshIdentity();

  const release = await holdThePool();
  const ctx = requestContext(key, principal);
  let error: Awaited<ReturnType<typeof trpcFailure>>;
  try {
    error = await trpcFailure(router.createCaller(ctx).create({ sku: 'book' }));
  } finally {
    await release();
  }
  expect(error.code).toBe('SERVICE_UNAVAILABLE');
  expect(ctx.resHeaders.get('retry-after')).toBe('2');
  expect(error.cause).toBeInstanceOf(IdempotencyError);
  expect((error.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.storeUnavailable);
  expect((error.cause as IdempotencyError).cause).toMatchObject({ code: 'P2028' });
  expect(executions).toBe(0);
  expect(await keyRows(db, principal)).toEqual([]);

  const retried = await router.createCaller(requestContext(key, principal)).create({ sku: 'book' });
  expect(retried).toEqual({ created: 1 });
  expect(executions).toBe(1);
});
