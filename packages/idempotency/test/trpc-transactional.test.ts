/** `.transactional()` end to end: tRPC's createCaller → middleware → Prisma store → Postgres. */
import type { Database } from '@idem/db';
import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { IdempotencyError, IdempotencyErrorCode } from '../src/index.ts';
import type { PrismaTransactionLike } from '../src/prisma/index.ts';
import { connectWithOwnTable, deferred, uniqueTableName } from './support/db.ts';
import {
  createTestTRPC,
  freshIdentity,
  keyRows,
  requestContext,
  type TestContext,
  trpcFailure,
} from './support/trpc.ts';

let db: Database;
const effects = uniqueTableName('effects');

beforeAll(async () => {
  db = await connectWithOwnTable();
  await db.$executeRawUnsafe(
    `create table "${effects}" (id serial primary key, scope text not null, note text not null)`,
  );
});
afterAll(async () => {
  await db.$executeRawUnsafe(`drop table if exists "${effects}"`);
  await db.$disconnect();
});

async function effectCount(scope: string): Promise<number> {
  const rows = await db.$queryRawUnsafe<Array<{ n: number }>>(
    `select count(*)::int as n from "${effects}" where scope = $1`,
    scope,
  );
  return rows[0]?.n ?? -1;
}

/**
 * A router with one transactional mutation that writes an effect row through `ctx.idempotency.tx` and then
 * does whatever `behaviour` says (return, throw…). Counts its executions.
 */
function setup(
  behaviour: (
    attempt: number,
    input: { note: string },
    tx: PrismaTransactionLike<Database>,
  ) => Promise<void> | void = () => {},
  options?: Parameters<ReturnType<typeof createTestTRPC>['idempotency']['transactional']>[0],
) {
  const { t, idempotency, events } = createTestTRPC(db);
  let executions = 0;
  const router = t.router({
    orders: t.router({
      place: t.procedure
        .concat(idempotency.transactional(options))
        .input(z.object({ note: z.string().min(1) }))
        .mutation(async ({ ctx, input }) => {
          executions += 1;
          const attempt = executions;
          const [row] = await ctx.idempotency.tx.$queryRawUnsafe<Array<{ id: number }>>(
            `insert into "${effects}" (scope, note) values ($1, $2) returning id`,
            ctx.idempotency.scope,
            input.note,
          );
          await behaviour(attempt, input, ctx.idempotency.tx);
          return { id: row?.id ?? -1, note: input.note, at: new Date(), attempt };
        }),
    }),
  });
  const createCaller = t.createCallerFactory(router);
  const call = (ctx: TestContext, input: { note: string } = { note: 'first' }) =>
    createCaller(ctx).orders.place(input);
  return { call, events, executions: () => executions };
}

describe('transactional mode', () => {
  it('runs once; a replay returns a deep-equal, type-faithful value and Idempotent-Replayed', async () => {
    const { principal, key } = freshIdentity();
    const { call, executions, events } = setup();
    const firstCtx = requestContext(key, principal);
    const first = await call(firstCtx);
    expect(first.at).toBeInstanceOf(Date);
    expect(firstCtx.resHeaders.get('Idempotent-Replayed')).toBeNull();

    const replayCtx = requestContext(`"${key}"`, principal); // the sf-string form is the same key
    const replay = await call(replayCtx);
    expect(replay).toEqual(first);
    expect(replay.at).toBeInstanceOf(Date);
    expect(replay.at.getTime()).toBe(first.at.getTime());
    expect(replayCtx.resHeaders.get('Idempotent-Replayed')).toBe('true');

    expect(executions()).toBe(1);
    expect(await effectCount(principal)).toBe(1);
    // The replay counter is statistics, bumped after the answer without being awaited.
    await expect
      .poll(() => keyRows(db, principal))
      .toMatchObject([{ procedure: 'orders.place', key, state: 'completed', replay_count: 1 }]);
    expect(events.map((event) => [event.outcome, event.mode, event.procedure])).toEqual([
      ['executed', 'transactional', 'orders.place'],
      ['replayed', 'transactional', 'orders.place'],
    ]);
    // Logs and metrics never see the key itself.
    expect(JSON.stringify(events)).not.toContain(key);
    expect(events[0]?.keyHash).toMatch(/^[0-9a-f]{16}$/);
    expect(events[1]?.keyHash).toBe(events[0]?.keyHash);
  });

  it('20 concurrent calls with the same key: one effect, twenty equal results', async () => {
    const { principal, key } = freshIdentity();
    const { call, executions } = setup(async () => {
      // Hold the transaction a little so the duplicates really queue on the unique index.
      await new Promise((resolve) => setTimeout(resolve, 50));
    });
    const contexts = Array.from({ length: 20 }, () => requestContext(key, principal));
    const results = await Promise.all(contexts.map((ctx) => call(ctx)));
    expect(executions()).toBe(1);
    expect(await effectCount(principal)).toBe(1);
    for (const result of results) expect(result).toEqual(results[0]);
    expect(contexts.filter((ctx) => ctx.resHeaders.get('Idempotent-Replayed') === 'true')).toHaveLength(19);
  });

  it('a stored business error is replayed, and its partial writes are rolled back', async () => {
    const { principal, key } = freshIdentity();
    const { call, executions } = setup(() => {
      throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Card declined' });
    });
    const first = await trpcFailure(call(requestContext(key, principal)));
    expect(first.code).toBe('PAYMENT_REQUIRED');
    expect(first.message).toBe('Card declined');
    expect(await effectCount(principal)).toBe(0);
    expect(await keyRows(db, principal)).toMatchObject([{ state: 'completed' }]);

    const replayCtx = requestContext(key, principal);
    const replay = await trpcFailure(call(replayCtx));
    expect(replay.code).toBe('PAYMENT_REQUIRED');
    expect(replay.message).toBe('Card declined');
    expect(replayCtx.resHeaders.get('Idempotent-Replayed')).toBe('true');
    expect(executions()).toBe(1);
    expect(await effectCount(principal)).toBe(0);
  });

  it('a stored business error after a failed SQL statement (aborted transaction) is still stored', async () => {
    const { principal, key } = freshIdentity();
    let sqlFailed = false;
    const { call, executions } = setup(async (_attempt, _input, tx) => {
      // A statement fails (the transaction is now aborted); the procedure answers with a business error.
      await tx
        .$executeRawUnsafe(`insert into "${effects}" (id, scope, note) values (1, 'x', 'x'), (1, 'x', 'x')`)
        .catch(() => {
          sqlFailed = true;
        });
      throw new TRPCError({ code: 'UNPROCESSABLE_CONTENT', message: 'Out of stock' });
    });
    const first = await trpcFailure(call(requestContext(key, principal)));
    expect(first.code).toBe('UNPROCESSABLE_CONTENT');
    const replayCtx = requestContext(key, principal);
    const replay = await trpcFailure(call(replayCtx));
    expect(replay.code).toBe('UNPROCESSABLE_CONTENT');
    expect(replay.message).toBe('Out of stock');
    expect(replayCtx.resHeaders.get('Idempotent-Replayed')).toBe('true');
    expect(sqlFailed).toBe(true);
    expect(executions()).toBe(1);
    expect(await effectCount(principal)).toBe(0);
  });

  it('a transient error stores nothing, rolls its writes back, and a retry runs again', async () => {
    const { principal, key } = freshIdentity();
    const { call, executions, events } = setup((attempt) => {
      if (attempt === 1) throw new Error('provider timeout');
    });
    const first = await trpcFailure(call(requestContext(key, principal)));
    expect(first.code).toBe('INTERNAL_SERVER_ERROR');
    expect(await keyRows(db, principal)).toEqual([]);
    expect(await effectCount(principal)).toBe(0);

    const retry = await call(requestContext(key, principal));
    expect(retry.attempt).toBe(2);
    expect(executions()).toBe(2);
    expect(await effectCount(principal)).toBe(1);
    expect(events.map((event) => event.outcome)).toEqual(['released', 'executed']);
  });

  it('an error code outside storedErrorCodes is not stored either (per-procedure override)', async () => {
    const { principal, key } = freshIdentity();
    const { call, executions } = setup(
      (attempt) => {
        if (attempt === 1) throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Card declined' });
      },
      { storedErrorCodes: ['NOT_FOUND'] },
    );
    expect((await trpcFailure(call(requestContext(key, principal)))).code).toBe('PAYMENT_REQUIRED');
    expect(await keyRows(db, principal)).toEqual([]);
    expect((await call(requestContext(key, principal))).attempt).toBe(2);
    expect(executions()).toBe(2);
  });

  it('an input validation error (BAD_REQUEST) is not stored: the corrected request runs', async () => {
    const { principal, key } = freshIdentity();
    const { call, executions } = setup();
    const invalid = await trpcFailure(call(requestContext(key, principal), { note: '' }));
    expect(invalid.code).toBe('BAD_REQUEST');
    expect(executions()).toBe(0);
    expect(await keyRows(db, principal)).toEqual([]);

    const corrected = await call(requestContext(key, principal), { note: 'fixed' });
    expect(corrected.note).toBe('fixed');
    expect(executions()).toBe(1);
  });

  it('a duplicate waits at most lockTimeoutMs for a running first request: 409 + Retry-After, then replay', async () => {
    const { principal, key } = freshIdentity();
    const started = deferred();
    const gate = deferred();
    const { call, executions, events } = setup(
      async (attempt) => {
        if (attempt !== 1) return;
        started.resolve();
        await gate.promise;
      },
      { lockTimeoutMs: 200, retryAfterSeconds: 3 },
    );
    const firstCall = call(requestContext(key, principal));
    await started.promise;

    const duplicateCtx = requestContext(key, principal);
    const startedAt = Date.now();
    const conflict = await trpcFailure(call(duplicateCtx));
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(150);
    expect(Date.now() - startedAt).toBeLessThan(3_000);
    expect(conflict.code).toBe('CONFLICT');
    expect(conflict.cause).toBeInstanceOf(IdempotencyError);
    expect((conflict.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.inProgress);
    expect(duplicateCtx.resHeaders.get('Retry-After')).toBe('3');
    expect(duplicateCtx.resHeaders.get('Idempotent-Replayed')).toBeNull();

    gate.resolve();
    const first = await firstCall;
    const thirdCtx = requestContext(key, principal);
    expect(await call(thirdCtx)).toEqual(first);
    expect(thirdCtx.resHeaders.get('Idempotent-Replayed')).toBe('true');
    expect(executions()).toBe(1);
    expect(await effectCount(principal)).toBe(1);
    expect(events.map((event) => event.outcome)).toEqual(['conflict', 'executed', 'replayed']);
  });

  it('different input with the same key → 422; another principal → independent', async () => {
    const { principal, key } = freshIdentity();
    const { call, executions } = setup();
    const first = await call(requestContext(key, principal), { note: 'a' });

    const mismatch = await trpcFailure(call(requestContext(key, principal), { note: 'b' }));
    expect(mismatch.code).toBe('UNPROCESSABLE_CONTENT');
    expect((mismatch.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.keyReused);

    const other = freshIdentity().principal;
    const otherCtx = requestContext(key, other);
    const otherResult = await call(otherCtx, { note: 'a' });
    expect(otherResult.id).not.toBe(first.id);
    expect(otherCtx.resHeaders.get('Idempotent-Replayed')).toBeNull();
    expect(executions()).toBe(2);
    expect(await effectCount(other)).toBe(1);
  });

  it('a replay of a key past its retention runs as new', async () => {
    const { principal, key } = freshIdentity();
    const { call, executions } = setup();
    await call(requestContext(key, principal));
    await db.$executeRawUnsafe(
      `update idempotency_keys set expires_at = now() - interval '1 second' where scope = $1`,
      principal,
    );
    const again = await call(requestContext(key, principal), { note: 'later' });
    expect(again.attempt).toBe(2);
    expect(executions()).toBe(2);
    expect(await effectCount(principal)).toBe(2);
  });
});
