/**
 * Replays from memory (`replayCache: createReplayCache()`), on the Postgres store through tRPC, in both modes: a
 * duplicate of a completed key is answered without the store once a duplicate has read it; never a first
 * execution, never another payload's or another principal's answer, never past the cache's time or the row's
 * expiry, and not after an eviction another process committed (its NOTIFY reached this one). CONTROLS: without
 * the cache every duplicate asks the store; without the eviction listener, the evicted answer is replayed.
 */
import type { Database } from '@idem/db';
import { TRPCError } from '@trpc/server';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createReplayCache,
  type IdempotencyOptions,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ReplayCache,
} from '../src/index.ts';
import { createIdempotencyKeyOperations, forgetEvictedKeys } from '../src/prisma/index.ts';
import { connectWithOwnTable, databaseUrl } from './support/db.ts';
import { createTestTRPC, freshIdentity, requestContext, trpcFailure } from './support/trpc.ts';

let db: Database;
const listeners: pg.Client[] = [];
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  for (const listener of listeners) await listener.end();
  await db.$disconnect();
});

/** A store that counts what reaches it. */
function counted<TTx>(store: IdempotencyStore<TTx>, calls: { claims: number }): IdempotencyStore<TTx> {
  return {
    ...store,
    claim: (request, tx) => {
      calls.claims += 1;
      return store.claim(request, tx);
    },
  };
}

/** The key's `replay_count` as the table holds it (counted in the background). */
async function replayCountOf(scope: string, procedure: string, key: string) {
  return (await createIdempotencyKeyOperations(db).findKey({ scope, procedure, key }))?.replayCount;
}

function app(replayCache: ReplayCache | null, defaults: IdempotencyOptions = {}) {
  const calls = { claims: 0 };
  const { t, idempotency } = createTestTRPC(db, replayCache ? { ...defaults, replayCache } : defaults, {
    wrapStore: (store) => counted(store, calls),
  });
  let runs = 0;
  const hold = (input: { amount: number }) => {
    runs += 1;
    return { amount: input.amount, run: runs };
  };
  const failingOnce = (input: { amount: number }) => {
    if (runs === 0) {
      runs += 1;
      throw new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'the first run fails' });
    }
    return hold(input);
  };
  const input = z.object({ amount: z.number() });
  const procedure = (mode: 'transactional' | 'external', body: (input: { amount: number }) => unknown) =>
    t.procedure
      .concat(idempotency[mode]())
      .input(input)
      .mutation(({ input }) => body(input));
  const router = t.router({
    transactional: procedure('transactional', hold),
    external: procedure('external', hold),
    // Fails (a 500: nothing stored, the key released) on its first run, succeeds after.
    transactionalFlaky: procedure('transactional', failingOnce),
    externalFlaky: procedure('external', failingOnce),
  });
  const caller = (key: string, principal: string) =>
    t.createCallerFactory(router)(requestContext(key, principal));
  return { caller, calls, runs: () => runs };
}

describe.each(['transactional', 'external'] as const)('%s mode', (mode) => {
  it('the first duplicate reads the store and is remembered; the next ones are answered from memory (CONTROL: without the cache, each asks the store)', async () => {
    const cached = app(createReplayCache());
    const { principal, key } = freshIdentity();
    const call = () => cached.caller(key, principal)[mode]({ amount: 5 });
    const first = await call();
    expect(cached.calls.claims).toBe(1);
    expect(await call()).toEqual(first);
    expect(cached.calls.claims).toBe(2);
    for (let i = 0; i < 3; i += 1) expect(await call()).toEqual(first);
    expect(cached.calls.claims).toBe(2);
    expect(cached.runs()).toBe(1);
    // Memory's replays are counted like the database's (in the background).
    await expect.poll(() => replayCountOf(principal, mode, key)).toBe(4);

    const plain = app(null);
    const other = freshIdentity();
    for (let i = 0; i < 4; i += 1) await plain.caller(other.key, other.principal)[mode]({ amount: 5 });
    expect(plain.calls.claims).toBe(4);
    expect(plain.runs()).toBe(1);
  });

  it("another payload under the remembered key gets the database's 422, another principal's key its own execution", async () => {
    const cached = app(createReplayCache());
    const { principal, key } = freshIdentity();
    await cached.caller(key, principal)[mode]({ amount: 5 });
    await cached.caller(key, principal)[mode]({ amount: 5 });
    const claims = cached.calls.claims;
    const mismatch = await trpcFailure(cached.caller(key, principal)[mode]({ amount: 6 }));
    expect(mismatch.code).toBe('UNPROCESSABLE_CONTENT');
    expect(cached.calls.claims).toBe(claims + 1);
    const stranger = freshIdentity().principal;
    expect(await cached.caller(key, stranger)[mode]({ amount: 5 })).toEqual({ amount: 5, run: 2 });
    expect(cached.runs()).toBe(2);
  });
});

describe.each(['transactional', 'external'] as const)('rememberCommitted, %s mode', (mode) => {
  const remembering = () => createReplayCache({ rememberCommitted: true });

  it('the response this process committed answers even the first duplicate from memory (CONTROL: without it, the first duplicate asks the store)', async () => {
    const cached = app(remembering());
    const { principal, key } = freshIdentity();
    const call = () => cached.caller(key, principal)[mode]({ amount: 5 });
    const first = await call();
    for (let i = 0; i < 3; i += 1) expect(await call()).toEqual(first);
    expect(cached.calls.claims).toBe(1);
    expect(cached.runs()).toBe(1);
    await expect.poll(() => replayCountOf(principal, mode, key)).toBe(3);

    const plain = app(createReplayCache());
    const other = freshIdentity();
    await plain.caller(other.key, other.principal)[mode]({ amount: 5 });
    await plain.caller(other.key, other.principal)[mode]({ amount: 5 });
    expect(plain.calls.claims).toBe(2);
  });

  it("never another payload's or another principal's answer: the database's 422, the stranger's own execution", async () => {
    const cached = app(remembering());
    const { principal, key } = freshIdentity();
    await cached.caller(key, principal)[mode]({ amount: 5 });
    const mismatch = await trpcFailure(cached.caller(key, principal)[mode]({ amount: 6 }));
    expect(mismatch.code).toBe('UNPROCESSABLE_CONTENT');
    expect(cached.calls.claims).toBe(2);
    const stranger = freshIdentity().principal;
    expect(await cached.caller(key, stranger)[mode]({ amount: 5 })).toEqual({ amount: 5, run: 2 });
    expect(cached.runs()).toBe(2);
  });

  it('a run that committed nothing is not remembered: the retry runs the procedure', async () => {
    const cached = app(remembering());
    const { principal, key } = freshIdentity();
    const call = () => cached.caller(key, principal)[`${mode}Flaky`]({ amount: 7 });
    expect((await trpcFailure(call())).code).toBe('INTERNAL_SERVER_ERROR');
    expect(await call()).toEqual({ amount: 7, run: 2 });
    expect(await call()).toEqual({ amount: 7, run: 2 });
    // The failed run, the retry's claim; its replay came from memory.
    expect(cached.calls.claims).toBe(2);
  });

  it('a key whose row expires within the margin is not remembered (retention 3 s, margin 5 s): its duplicate asks the store', async () => {
    const cached = app(remembering(), { retentionSeconds: 3 });
    const { principal, key } = freshIdentity();
    const first = await cached.caller(key, principal)[mode]({ amount: 1 });
    expect(await cached.caller(key, principal)[mode]({ amount: 1 })).toEqual(first);
    expect(cached.calls.claims).toBe(2);
  });
});

describe('time', () => {
  it('past ttlSeconds the cache no longer answers: the store does', async () => {
    let now = Date.now();
    const cached = app(createReplayCache({ ttlSeconds: 60, now: () => now }));
    const { principal, key } = freshIdentity();
    const call = () => cached.caller(key, principal).transactional({ amount: 1 });
    await call();
    await call();
    await call();
    expect(cached.calls.claims).toBe(2);
    now += 61_000;
    await call();
    expect(cached.calls.claims).toBe(3);
    expect(cached.runs()).toBe(1);
  });

  it('a row about to expire is not remembered: its key may be claimed again any moment (aged row, not a wait)', async () => {
    const cached = app(createReplayCache({ expiryMarginSeconds: 5 }));
    const { principal, key } = freshIdentity();
    const call = () => cached.caller(key, principal).transactional({ amount: 1 });
    await call();
    await db.$executeRawUnsafe(
      `update idempotency_keys set expires_at = now() + interval '3 seconds' where scope = $1 and key = $2`,
      principal,
      key,
    );
    await call();
    await call();
    expect(cached.calls.claims).toBe(3);
    // Expired in the database: the key is claimed again and the procedure runs, whatever memory once held.
    await db.$executeRawUnsafe(
      `update idempotency_keys set expires_at = now() - interval '1 second' where scope = $1 and key = $2`,
      principal,
      key,
    );
    expect(await call()).toEqual({ amount: 1, run: 2 });
  });
});

describe('eviction in another process', () => {
  /** A cache listening for evictions on a connection of its own; `forgotten` resolves with each key it drops. */
  async function listeningCache() {
    const cache = createReplayCache();
    const forgotten: string[] = [];
    const listened: ReplayCache = {
      ...cache,
      replay: (request) => cache.replay(request),
      remember: (request, record) => cache.remember(request, record),
      forget: (key) => {
        forgotten.push(key.key);
        cache.forget(key);
      },
      clear: () => cache.clear(),
      get size() {
        return cache.size;
      },
    };
    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    listeners.push(client);
    await forgetEvictedKeys(client, listened);
    return { cache: listened, forgotten };
  }

  it('an operator evicts a completed key elsewhere; once the notice arrives, the next retry runs again (CONTROL: no listener → the evicted answer is replayed)', async () => {
    const listening = await listeningCache();
    const here = app(listening.cache);
    const deaf = app(createReplayCache());
    const { principal, key } = freshIdentity();
    for (const process of [here, deaf]) {
      await process.caller(key, principal).transactional({ amount: 9 });
      await process.caller(key, principal).transactional({ amount: 9 });
    }
    expect(here.runs() + deaf.runs()).toBe(1);

    const operations = createIdempotencyKeyOperations(db);
    const ref = { scope: principal, procedure: 'transactional', key };
    const row = await operations.findKey(ref);
    if (!row) throw new Error('no row');
    const evicted = await operations.evict({
      key: ref,
      version: row.version,
      confirmed: true,
      audit: async () => null,
    });
    expect(evicted.evicted).toBe(true);
    await expect.poll(() => listening.forgotten).toContain(key);

    expect(await here.caller(key, principal).transactional({ amount: 9 })).toEqual({ amount: 9, run: 2 });
    expect(here.runs()).toBe(2);
    // CONTROL: the process that did not listen still answers from memory: the evicted answer (run 1), not the
    // key's answer now (run 2).
    expect(await deaf.caller(key, principal).transactional({ amount: 9 })).toMatchObject({ run: 1 });
    expect(deaf.runs()).toBe(0);
  });
});

describe('bounds', () => {
  const request = (key: string) => ({ scope: 's', procedure: 'p', key, fingerprint: 'f' });
  const completed = (key: string, body: string): IdempotencyRecord => ({
    ...request(key),
    state: 'completed',
    response: { kind: 'output', httpStatus: 200, body },
    leaseOwner: null,
    leaseActive: false,
    createdAt: new Date(),
    expiresAt: new Date(Date.now() + 86_400_000),
    replayCount: 0,
  });

  it('holds at most maxEntries keys: the least recently replayed goes first', () => {
    const cache = createReplayCache({ maxEntries: 2 });
    cache.remember(request('a'), completed('a', 'A'));
    cache.remember(request('b'), completed('b', 'B'));
    expect(cache.replay(request('a'))).toMatchObject({ body: 'A' }); // a is now the most recent
    cache.remember(request('c'), completed('c', 'C'));
    expect(cache.size).toBe(2);
    expect(cache.replay(request('b'))).toBeUndefined();
    expect(cache.replay(request('a'))).toMatchObject({ body: 'A' });
    expect(cache.replay(request('c'))).toMatchObject({ body: 'C' });
  });

  it('holds at most maxBytes of responses, and none larger than a tenth of it', () => {
    const cache = createReplayCache({ maxBytes: 1_000 });
    cache.remember(request('big'), completed('big', 'x'.repeat(200)));
    expect(cache.size).toBe(0);
    for (const key of ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l'])
      cache.remember(request(key), completed(key, 'y'.repeat(40)));
    // Each entry is about 80 bytes of JSON: twelve do not fit in 1 000, the oldest went.
    expect(cache.size).toBeLessThan(12);
    expect(cache.replay(request('a'))).toBeUndefined();
    expect(cache.replay(request('l'))).toMatchObject({ body: 'y'.repeat(40) });
  });

  it('rememberCommitted: ignored unless asked for; an expiry past what a Date holds still ends at ttlSeconds', () => {
    const response = { kind: 'output', httpStatus: 200, body: 'R' } as const;
    const off = createReplayCache();
    off.rememberCommitted?.(request('r'), response, new Date(Date.now() + 86_400_000));
    expect(off.size).toBe(0);
    let now = 1_000_000;
    const on = createReplayCache({ rememberCommitted: true, ttlSeconds: 60, now: () => now });
    on.rememberCommitted?.(request('r'), response, new Date(Number.NaN));
    expect(on.replay(request('r'))).toEqual(response);
    now += 61_000;
    expect(on.replay(request('r'))).toBeUndefined();
  });

  it("remembers only a completed record of the request's own fingerprint; a replay is a copy", () => {
    const cache = createReplayCache();
    cache.remember(request('p'), { ...completed('p', 'P'), state: 'processing', response: null });
    cache.remember({ ...request('q'), fingerprint: 'other' }, completed('q', 'Q'));
    expect(cache.size).toBe(0);
    cache.remember(request('r'), completed('r', 'R'));
    const first = cache.replay(request('r'));
    if (first) first.body = 'changed by an adapter';
    expect(cache.replay(request('r'))).toMatchObject({ body: 'R' });
  });
});
