/**
 * `missingKey`: a request without an `Idempotency-Key` is refused by default (400, nothing runs); with
 * `missingKey: 'passthrough'` (a rollout aid for clients that send no key yet) it runs unprotected — nothing
 * claimed or stored, a retry runs again — and is reported as an `unkeyed` outcome. A keyed request under
 * `passthrough` is protected exactly as before, and a malformed key is still a 400.
 */
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type IdempotencyError, IdempotencyErrorCode, type MissingKeyPolicy } from '../src/index.ts';
import { connectWithOwnTable, uniqueTableName } from './support/db.ts';
import { createTestTRPC, freshIdentity, keyRows, requestContext, trpcFailure } from './support/trpc.ts';

let db: Database;
const effects = uniqueTableName('effects');

beforeAll(async () => {
  db = await connectWithOwnTable();
  await db.$executeRawUnsafe(`create table "${effects}" (id serial primary key, scope text not null)`);
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

/** One transactional and one external mutation, each writing one effect row, under `missingKey`. */
function setup(missingKey?: MissingKeyPolicy) {
  const { t, idempotency, events } = createTestTRPC(db, missingKey ? { missingKey } : undefined);
  const seen: Array<{ key: string; keyed: boolean }> = [];
  const router = t.router({
    transactional: t.procedure
      .concat(idempotency.transactional())
      .input(z.object({ fail: z.boolean() }))
      .mutation(async ({ ctx, input }) => {
        seen.push({ key: ctx.idempotency.key, keyed: ctx.idempotency.keyed });
        await ctx.idempotency.tx.$executeRawUnsafe(
          `insert into "${effects}" (scope) values ($1)`,
          ctx.idempotency.scope,
        );
        if (input.fail) throw new Error('transient');
        return { done: true };
      }),
    external: t.procedure
      .concat(idempotency.external())
      .input(z.object({ fail: z.boolean() }))
      .mutation(async ({ ctx }) => {
        seen.push({ key: ctx.idempotency.key, keyed: ctx.idempotency.keyed });
        await db.$executeRawUnsafe(`insert into "${effects}" (scope) values ($1)`, ctx.idempotency.scope);
        return { done: true };
      }),
  });
  const caller = (key: string | null, principal: string) =>
    t.createCallerFactory(router)(requestContext(key, principal));
  return { caller, events, seen };
}

describe('missingKey', () => {
  it("'reject' (the default): no key is a 400 and nothing runs", async () => {
    const { caller, events } = setup();
    const { principal } = freshIdentity();
    const error = await trpcFailure(caller(null, principal).external({ fail: false }));
    expect(error.code).toBe('BAD_REQUEST');
    expect((error.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.missingKey);
    expect(await effectCount(principal)).toBe(0);
    expect(events.map((event) => event.outcome)).toEqual(['rejected']);
  });

  it("'passthrough': without a key, each request runs unprotected (two sends, two effects) and is unkeyed", async () => {
    const { caller, events, seen } = setup('passthrough');
    const { principal } = freshIdentity();
    await expect(caller(null, principal).external({ fail: false })).resolves.toEqual({ done: true });
    await expect(caller(null, principal).external({ fail: false })).resolves.toEqual({ done: true });
    await expect(caller(null, principal).transactional({ fail: false })).resolves.toEqual({ done: true });
    // Unprotected, as the client asked for by sending no key: every send is its own request.
    expect(await effectCount(principal)).toBe(3);
    expect(await keyRows(db, principal)).toEqual([]);
    expect(events.map((event) => [event.outcome, event.keyHash])).toEqual([
      ['unkeyed', null],
      ['unkeyed', null],
      ['unkeyed', null],
    ]);
    // A key of its own per request, marked as not the client's: forwarding it cannot merge two requests.
    expect(seen.every((call) => !call.keyed)).toBe(true);
    expect(new Set(seen.map((call) => call.key)).size).toBe(3);
  });

  it("'passthrough': an unkeyed transactional request that fails rolls its writes back", async () => {
    const { caller } = setup('passthrough');
    const { principal } = freshIdentity();
    await expect(caller(null, principal).transactional({ fail: true })).rejects.toThrow('transient');
    expect(await effectCount(principal)).toBe(0);
  });

  it("'passthrough': a keyed request is still protected (two sends, one effect, a replay)", async () => {
    const { caller, events, seen } = setup('passthrough');
    const { principal, key } = freshIdentity();
    await caller(key, principal).external({ fail: false });
    await caller(key, principal).external({ fail: false });
    expect(await effectCount(principal)).toBe(1);
    expect(events.map((event) => event.outcome)).toEqual(['executed', 'replayed']);
    expect(seen).toEqual([{ key, keyed: true }]);
  });

  it("'passthrough': a malformed key is still a 400, never a pass", async () => {
    const { caller } = setup('passthrough');
    const { principal } = freshIdentity();
    const error = await trpcFailure(caller('', principal).external({ fail: false }));
    expect((error.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.malformedKey);
    expect(await effectCount(principal)).toBe(0);
  });

  it("'passthrough' still needs a principal: no scope is a 401", async () => {
    const { t, idempotency } = createTestTRPC(db, { missingKey: 'passthrough' });
    const router = t.router({ run: t.procedure.concat(idempotency.external()).mutation(() => 'ran') });
    const context = { ...requestContext(null, null) };
    const error = await trpcFailure(t.createCallerFactory(router)(context).run());
    expect(error.code).toBe('UNAUTHORIZED');
  });
});
