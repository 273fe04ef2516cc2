/**
 * The per-principal cap on keys in flight (`maxInFlightPerScope`, contract: "429 past it"): the store's claim
 * refuses a NEW key of a scope that already has `max` keys `processing` under a live lease, stores nothing,
 * and never counts duplicates of keys already claimed. Then the same through the handler and tRPC (429,
 * TOO_MANY_REQUESTS, Retry-After), and what concurrency does to it (approximate cap, once-only intact).
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resolveOptions } from '../src/core/config.ts';
import { handleExternal } from '../src/core/external.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import {
  type ClaimRequest,
  DEFAULT_OPTIONS,
  fingerprintRequest,
  IdempotencyError,
  IdempotencyErrorCode,
  type RecordKey,
  type StoredResponse,
} from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { toTRPCError } from '../src/trpc/index.ts';
import { connectWithOwnTable, deferred, uniqueScope, waitUntil } from './support/db.ts';
import { createTestTRPC, keyRows } from './support/trpc.ts';

let db: Database;
let store: ReturnType<typeof createPrismaIdempotencyStore<Database>>;

beforeAll(async () => {
  db = await connectWithOwnTable(12);
  store = createPrismaIdempotencyStore(db);
});
afterAll(async () => {
  await db.$disconnect();
});

const procedure = 'orders.place';
const fingerprintA = fingerprintRequest(procedure, { a: 1 });
const fingerprintB = fingerprintRequest(procedure, { a: 2 });
const output: StoredResponse = { kind: 'output', httpStatus: 200, body: '{"json":{"id":1}}' };

function claimRequest(scope: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope,
    procedure,
    key: randomUUID(),
    fingerprint: fingerprintA,
    owner: randomUUID(),
    leaseSeconds: 30,
    retentionSeconds: 3_600,
    inFlightCap: { max: 3, retryAfterSeconds: 2 },
    ...overrides,
  };
}

const keyOf = ({ scope, procedure, key }: RecordKey): RecordKey => ({ scope, procedure, key });

function updateRow(key: RecordKey, set: string) {
  return db.$executeRawUnsafe(
    `update idempotency_keys set ${set} where scope = $1 and procedure = $2 and key = $3`,
    key.scope,
    key.procedure,
    key.key,
  );
}

async function rowsOf(scope: string): Promise<number> {
  const rows = await db.$queryRawUnsafe<Array<{ n: number }>>(
    'select count(*)::int as n from idempotency_keys where scope = $1',
    scope,
  );
  return rows[0]?.n ?? -1;
}

/** Awaits a promise that must reject with the cap's IdempotencyError, and returns it. */
async function capRefusal(promise: Promise<unknown>): Promise<IdempotencyError> {
  const error = await promise.then(
    () => null,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(IdempotencyError);
  const refusal = error as IdempotencyError;
  expect(refusal.code).toBe(IdempotencyErrorCode.tooManyInFlight);
  return refusal;
}

/** Fills `scope` with `count` live in-flight keys (cap 3 unless said otherwise). */
async function fill(scope: string, count: number, overrides: Partial<ClaimRequest> = {}) {
  const claims: ClaimRequest[] = [];
  for (let index = 0; index < count; index += 1) {
    const request = claimRequest(scope, overrides);
    expect(await store.claim(request)).toEqual({ claimed: true, takeover: false });
    claims.push(request);
  }
  return claims;
}

describe('options', () => {
  it('maxInFlightPerScope defaults to 20; Infinity switches the cap off; nonsense is refused', () => {
    expect(DEFAULT_OPTIONS.maxInFlightPerScope).toBe(20);
    expect(resolveOptions().maxInFlightPerScope).toBe(20);
    expect(resolveOptions({ maxInFlightPerScope: 5 }).maxInFlightPerScope).toBe(5);
    expect(resolveOptions({ maxInFlightPerScope: Number.POSITIVE_INFINITY }).maxInFlightPerScope).toBe(
      Number.POSITIVE_INFINITY,
    );
    for (const bad of [0, -1, 1.5, Number.NaN, Number.NEGATIVE_INFINITY]) {
      expect(() => resolveOptions({ maxInFlightPerScope: bad }), String(bad)).toThrow(RangeError);
    }
  });

  it('the error: 429, a readable message, Retry-After seconds; tRPC TOO_MANY_REQUESTS', async () => {
    const scope = uniqueScope();
    await fill(scope, 3);
    const refusal = await capRefusal(store.claim(claimRequest(scope)));
    expect(refusal.httpStatus).toBe(429);
    expect(refusal.retryAfterSeconds).toBe(2);
    expect(refusal.message).toMatch(/at most 3 Idempotency-Keys may be in flight/);
    const trpcError = toTRPCError(refusal);
    expect(trpcError.code).toBe('TOO_MANY_REQUESTS');
    expect(trpcError.cause).toBe(refusal);
  });
});

describe('store: the cap is part of the claim statement', () => {
  it('refuses the (max+1)-th new key of a scope and stores nothing for it', async () => {
    const scope = uniqueScope();
    await fill(scope, 3);
    const fourth = claimRequest(scope);
    await capRefusal(store.claim(fourth));
    expect(await store.find(keyOf(fourth))).toBeNull();
    expect(await rowsOf(scope)).toBe(3);
  });

  it('duplicates of claimed keys are not new: same request → the record; other request → the record (422 later)', async () => {
    const scope = uniqueScope();
    const [first] = await fill(scope, 3);
    if (!first) throw new Error('unreachable');
    const same = await store.claim({ ...first, owner: randomUUID() });
    expect(same).toMatchObject({ claimed: false, record: { key: first.key, state: 'processing' } });
    const other = await store.claim({ ...first, owner: randomUUID(), fingerprint: fingerprintB });
    expect(other).toMatchObject({ claimed: false, record: { fingerprint: fingerprintA } });
    // A completed key at the cap replays too.
    expect(await store.complete(first, first.owner, output)).toBe(true);
    await fill(scope, 1); // back at the cap
    const replay = await store.claim({ ...first, owner: randomUUID() });
    expect(replay).toMatchObject({ claimed: false, record: { state: 'completed', response: output } });
  });

  it('other scopes are independent', async () => {
    const full = uniqueScope();
    await fill(full, 3);
    await capRefusal(store.claim(claimRequest(full)));
    await fill(uniqueScope(), 3);
  });

  it('counts across procedures of one scope', async () => {
    const scope = uniqueScope();
    await fill(scope, 2, { procedure: 'a.one' });
    await fill(scope, 1, { procedure: 'b.two' });
    await capRefusal(store.claim(claimRequest(scope, { procedure: 'c.three' })));
  });

  it('completed, released and dead-lease keys free their slot', async () => {
    const scope = uniqueScope();
    const [done, freed, dead] = await fill(scope, 3);
    if (!done || !freed || !dead) throw new Error('unreachable');
    await capRefusal(store.claim(claimRequest(scope)));

    expect(await store.complete(done, done.owner, output)).toBe(true);
    await fill(scope, 1);
    await capRefusal(store.claim(claimRequest(scope)));

    expect(await store.release(freed, freed.owner)).toBe(true);
    await fill(scope, 1);
    await capRefusal(store.claim(claimRequest(scope)));

    await updateRow(dead, "locked_until = now() - interval '1 second'");
    await fill(scope, 1);
    await capRefusal(store.claim(claimRequest(scope)));
  });

  it('at the cap, the same request may still take over its own dead lease (a retry, not a new key)', async () => {
    const scope = uniqueScope();
    const [crashed] = await fill(scope, 1);
    if (!crashed) throw new Error('unreachable');
    await updateRow(crashed, "locked_until = now() - interval '1 second'");
    await fill(scope, 3); // 3 live + 1 dead
    expect(await store.claim({ ...crashed, owner: randomUUID() })).toEqual({ claimed: true, takeover: true });
    // A NEW key is still refused: 4 live now.
    await capRefusal(store.claim(claimRequest(scope)));
  });

  it('an expired key reused with a new request IS new: refused at the cap, taken over below it', async () => {
    const scope = uniqueScope();
    const [old] = await fill(scope, 1);
    if (!old) throw new Error('unreachable');
    expect(await store.complete(old, old.owner, output)).toBe(true);
    await updateRow(old, "expires_at = now() - interval '1 second'");
    const live = await fill(scope, 3);

    const reuse = { ...old, owner: randomUUID(), fingerprint: fingerprintB };
    await capRefusal(store.claim(reuse));
    const record = await store.find(keyOf(old));
    expect(record).toMatchObject({ state: 'completed', fingerprint: fingerprintA, response: output });

    const [one] = live;
    if (!one) throw new Error('unreachable');
    await store.complete(one, one.owner, output);
    expect(await store.claim(reuse)).toEqual({ claimed: true, takeover: true });
    expect(await store.find(keyOf(old))).toMatchObject({ state: 'processing', fingerprint: fingerprintB });
  });

  it('no cap given (or Infinity): unlimited, as before', async () => {
    const scope = uniqueScope();
    await fill(scope, 5, { inFlightCap: undefined });
    await fill(scope, 2, { inFlightCap: { max: Number.POSITIVE_INFINITY, retryAfterSeconds: 1 } });
    expect(await rowsOf(scope)).toBe(7);
  });

  it('inside a transaction (transactional mode) the refusal is thrown there, and nothing commits', async () => {
    const scope = uniqueScope();
    await fill(scope, 3);
    const request = claimRequest(scope);
    await capRefusal(
      store.transaction((tx) => store.claim(request, tx), { lockTimeoutMs: 1_000, timeoutMs: 5_000 }),
    );
    expect(await store.find(keyOf(request))).toBeNull();
  });
});

describe('handler: 429 before anything runs', () => {
  it('external: the (max+1)-th concurrent request is refused without running; a slot frees → runs', async () => {
    const scope = uniqueScope();
    const options = resolveOptions({ maxInFlightPerScope: 2, retryAfterSeconds: 3 });
    const gate = deferred();
    let runs = 0;
    const request = () => ({ scope, procedure, key: randomUUID(), fingerprint: fingerprintA });
    const run = async () => {
      runs += 1;
      await gate.promise;
      return { result: 'ok', response: output };
    };
    const first = handleExternal(store, options, request(), run);
    const second = handleExternal(store, options, request(), run);
    await waitUntil(() => runs === 2);

    const third = request();
    const refusal = await capRefusal(handleExternal(store, options, third, run));
    expect(refusal.retryAfterSeconds).toBe(3);
    expect(runs).toBe(2);
    expect(await store.find(third)).toBeNull();

    gate.resolve();
    expect(await first).toEqual({ kind: 'executed', result: 'ok' });
    expect(await second).toEqual({ kind: 'executed', result: 'ok' });
    expect(await handleExternal(store, options, third, run)).toEqual({ kind: 'executed', result: 'ok' });
    expect(runs).toBe(3);
  });

  it('transactional: refused while the scope has external keys at the cap; nothing runs', async () => {
    const scope = uniqueScope();
    await fill(scope, 2, { inFlightCap: undefined });
    const options = resolveOptions({ maxInFlightPerScope: 2 });
    const request = { scope, procedure, key: randomUUID(), fingerprint: fingerprintA };
    let runs = 0;
    await capRefusal(
      handleTransactional(store, options, request, async () => {
        runs += 1;
        return { result: 'ok', response: output };
      }),
    );
    expect(runs).toBe(0);
    expect(await store.find(request)).toBeNull();
  });
});

describe('tRPC over the fetch adapter', () => {
  it('429 TOO_MANY_REQUESTS + Retry-After, readable message; the in-flight ones finish; then a new key runs', async () => {
    const { t, idempotency } = createTestTRPC(db, { maxInFlightPerScope: 2, retryAfterSeconds: 2 });
    const gate = deferred();
    let runs = 0;
    const router = t.router({
      place: t.procedure
        .concat(idempotency.external())
        .input(z.object({ n: z.number() }))
        .mutation(async ({ input }) => {
          runs += 1;
          await gate.promise;
          return { n: input.n };
        }),
    });
    const principal = uniqueScope();
    const post = (key: string, n: number) =>
      fetchRequestHandler({
        endpoint: '/trpc',
        router,
        req: new Request('http://local/trpc/place', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify(superjson.serialize({ n })),
        }),
        createContext: ({ resHeaders }) => ({
          headers: new Headers({ 'idempotency-key': key }),
          resHeaders,
          principalId: principal,
        }),
      });

    const keys = [randomUUID(), randomUUID(), randomUUID()];
    const inFlight = [post(keys[0] ?? '', 0), post(keys[1] ?? '', 1)];
    await waitUntil(() => runs === 2);
    const refused = await post(keys[2] ?? '', 2);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('2');
    const body = (await refused.json()) as { error: { json: { message: string; data: { code: string } } } };
    expect(body.error.json.data.code).toBe('TOO_MANY_REQUESTS');
    expect(body.error.json.message).toMatch(/Too many requests in progress/);

    // A duplicate of an in-flight key is a 409 (not counted as new), not a 429.
    const duplicate = await post(keys[0] ?? '', 0);
    expect(duplicate.status).toBe(409);

    gate.resolve();
    expect((await Promise.all(inFlight)).map((response) => response.status)).toEqual([200, 200]);
    const retried = await post(keys[2] ?? '', 2);
    expect(retried.status).toBe(200);
    expect(runs).toBe(3);
    expect((await keyRows(db, principal)).map((row) => row.state)).toEqual([
      'completed',
      'completed',
      'completed',
    ]);
  });
});

describe('concurrency', () => {
  it('sequential claims are exact; a burst of parallel new keys is capped approximately, and a refused key stores nothing', async () => {
    const scope = uniqueScope();
    const cap = { max: 10, retryAfterSeconds: 1 };
    const requests = Array.from({ length: 30 }, () => claimRequest(scope, { inFlightCap: cap }));
    const outcomes = await Promise.all(
      requests.map((request) =>
        store.claim(request).then(
          () => 'claimed' as const,
          (error: unknown) => {
            if (error instanceof IdempotencyError && error.code === IdempotencyErrorCode.tooManyInFlight)
              return 'refused' as const;
            throw error;
          },
        ),
      ),
    );
    const claimed = outcomes.filter((outcome) => outcome === 'claimed').length;
    console.log(
      `[in-flight cap] 30 parallel new keys, cap 10, pool 12: ${claimed} claimed, ${30 - claimed} refused (429)`,
    );
    expect(claimed).toBeGreaterThanOrEqual(10); // never under-admits
    expect(claimed).toBeLessThan(30); // and does cap
    expect(await rowsOf(scope)).toBe(claimed);
    for (const [index, request] of requests.entries()) {
      if (outcomes[index] === 'refused') expect(await store.find(keyOf(request))).toBeNull();
    }
    // Once the burst is over, the check is exact again: the next new key is refused.
    await capRefusal(store.claim(claimRequest(scope, { inFlightCap: cap })));
  });

  it('the cap never weakens once-only: 30 parallel claims of ONE key at the cap boundary → exactly one owner', async () => {
    const scope = uniqueScope();
    await fill(scope, 2);
    const key = randomUUID();
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, () => store.claim(claimRequest(scope, { key }))),
    );
    const owners = results.filter((result) => result.status === 'fulfilled' && result.value.claimed);
    expect(owners).toHaveLength(1);
    // The others saw the key (a duplicate) or, racing before it existed, the cap at 3: never a second owner.
    for (const result of results) {
      if (result.status === 'rejected')
        expect((result.reason as IdempotencyError).code).toBe(IdempotencyErrorCode.tooManyInFlight);
    }
  });
});
