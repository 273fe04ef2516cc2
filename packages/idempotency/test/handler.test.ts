/**
 * The framework-free lifecycles (core/transactional.ts, core/external.ts) on the real Postgres store, for the paths an adapter cannot
 * easily reach: a `run` that throws, a store that fails mid-way, a released key while a duplicate waits.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import { handleExternal } from '../src/core/external.ts';
import type { IdempotentRequest } from '../src/core/request.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import {
  fingerprintRequest,
  IdempotencyError,
  IdempotencyErrorCode,
  type IdempotencyStore,
  type StoredResponse,
} from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, deferred, uniqueScope, waitUntil } from './support/db.ts';
import { caught } from './support/promises.ts';

let db: Database;
let store: ReturnType<typeof createPrismaIdempotencyStore<Database>>;
beforeAll(async () => {
  db = await connectWithOwnTable();
  store = createPrismaIdempotencyStore(db);
});
afterAll(async () => {
  await db.$disconnect();
});

const options = resolveOptions();
const output = (body: string): StoredResponse => ({ kind: 'output', httpStatus: 200, body });

function newRequest(): IdempotentRequest {
  return {
    scope: uniqueScope(),
    procedure: 'core.op',
    key: randomUUID(),
    fingerprint: fingerprintRequest('core.op', { n: 1 }),
  };
}

describe('handleExternal', () => {
  it('executes, stores, then replays the stored response', async () => {
    const request = newRequest();
    let runs = 0;
    const run = async () => {
      runs += 1;
      return { result: `r${runs}`, response: output(`"r${runs}"`) };
    };
    expect(await handleExternal(store, options, request, run)).toEqual({ kind: 'executed', result: 'r1' });
    expect(await handleExternal(store, options, request, run)).toEqual({
      kind: 'replayed',
      response: output('"r1"'),
    });
    expect(runs).toBe(1);
    // Counted off the request path (not awaited): wait for it.
    await waitUntil(async () => (await store.find(request))?.replayCount === 1);
  });

  it('a run that throws releases the key and rethrows; the retry runs', async () => {
    const request = newRequest();
    const failure = new Error('adapter bug');
    expect(
      await caught(
        handleExternal(store, options, request, async () => {
          throw failure;
        }),
      ),
    ).toBe(failure);
    expect(await store.find(request)).toBeNull();
    expect(
      await handleExternal(store, options, request, async () => ({ result: 2, response: output('2') })),
    ).toEqual({ kind: 'executed', result: 2 });
  });

  it('a run that throws still rethrows its own error when the release fails too', async () => {
    const request = newRequest();
    const failing: IdempotencyStore<unknown> = {
      ...store,
      release: async () => {
        throw new Error('connection lost');
      },
    };
    const failure = new Error('adapter bug');
    expect(
      await caught(
        handleExternal(failing, options, request, async () => {
          throw failure;
        }),
      ),
    ).toBe(failure);
    // Not released: the lease protects the key until it ends.
    expect(await store.find(request)).toMatchObject({ state: 'processing', leaseActive: true });
  });

  it('a non-storable outcome releases the key', async () => {
    const request = newRequest();
    expect(
      await handleExternal(store, options, request, async () => ({ result: 'transient', response: null })),
    ).toEqual({ kind: 'released', result: 'transient' });
    expect(await store.find(request)).toBeNull();
  });

  it('when completion fails (outcome unknown), the key stays claimed under its lease, never released', async () => {
    const request = newRequest();
    const failing: IdempotencyStore<unknown> = {
      ...store,
      complete: async () => {
        throw new Error('connection lost');
      },
    };
    await expect(
      handleExternal(failing, options, request, async () => ({ result: 1, response: output('1') })),
    ).rejects.toThrow('connection lost');
    expect(await store.find(request)).toMatchObject({ state: 'processing', leaseActive: true });
    // A retry during the lease gets a 409, not a second execution.
    const conflict = await caught(
      handleExternal(store, options, request, async () => ({ result: 2, response: output('2') })),
    );
    expect(conflict).toBeInstanceOf(IdempotencyError);
    expect((conflict as IdempotencyError).code).toBe(IdempotencyErrorCode.inProgress);
  });

  it('a replay is not failed by a failing replay counter', async () => {
    const request = newRequest();
    await handleExternal(store, options, request, async () => ({ result: 1, response: output('1') }));
    const failing: IdempotencyStore<unknown> = {
      ...store,
      countReplay: async () => {
        throw new Error('connection lost');
      },
    };
    expect(
      await handleExternal(failing, options, request, async () => ({ result: 2, response: output('2') })),
    ).toEqual({ kind: 'replayed', response: output('1') });
  });

  it('a waiting duplicate stops waiting (409) as soon as the first request releases the key', async () => {
    const request = newRequest();
    const gate = deferred();
    let running = false;
    const first = handleExternal(store, options, request, async () => {
      running = true;
      await gate.promise;
      return { result: 'transient', response: null };
    });
    await waitUntil(() => running);
    const waiting = resolveOptions({ waitForInFlightMs: 5_000 });
    const startedAt = Date.now();
    const duplicate = caught(
      handleExternal(store, waiting, request, async () => ({ result: 'dup', response: output('"dup"') })),
    );
    setTimeout(gate.resolve, 100);
    expect(await first).toEqual({ kind: 'released', result: 'transient' });
    const error = await duplicate;
    expect((error as IdempotencyError).code).toBe(IdempotencyErrorCode.inProgress);
    expect((error as IdempotencyError).retryAfterSeconds).toBe(1);
    expect(Date.now() - startedAt).toBeLessThan(2_000);
  });

  it('a duplicate with another fingerprint gets 422 at once, even while waiting is allowed', async () => {
    const request = newRequest();
    const gate = deferred();
    let running = false;
    const first = handleExternal(store, options, request, async () => {
      running = true;
      await gate.promise;
      return { result: 1, response: output('1') };
    });
    await waitUntil(() => running);
    const startedAt = Date.now();
    const error = await caught(
      handleExternal(
        store,
        resolveOptions({ waitForInFlightMs: 5_000 }),
        { ...request, fingerprint: fingerprintRequest('core.op', { n: 2 }) },
        async () => ({ result: 2, response: output('2') }),
      ),
    );
    expect((error as IdempotencyError).code).toBe(IdempotencyErrorCode.keyReused);
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    gate.resolve();
    await first;
  });
});

describe('handleTransactional', () => {
  it('a run that throws rolls the claim back and rethrows', async () => {
    const request = newRequest();
    const failure = new Error('adapter bug');
    expect(
      await caught(
        handleTransactional(store, options, request, async () => {
          throw failure;
        }),
      ),
    ).toBe(failure);
    expect(await store.find(request)).toBeNull();
  });

  it('executes inside the transaction, then replays', async () => {
    const request = newRequest();
    let sawTransaction = false;
    const run = async (tx: unknown) => {
      sawTransaction = tx !== db && typeof (tx as Database).$executeRawUnsafe === 'function';
      // Uncommitted yet: invisible outside the transaction.
      expect(await store.find(request)).toBeNull();
      return { result: 'ok', response: output('"ok"') };
    };
    expect(await handleTransactional(store, options, request, run)).toEqual({
      kind: 'executed',
      result: 'ok',
    });
    expect(sawTransaction).toBe(true);
    expect(await handleTransactional(store, options, request, run)).toEqual({
      kind: 'replayed',
      response: output('"ok"'),
    });
    expect((await store.find(request))?.state).toBe('completed');
  });

  it('a database failure that is not a lock timeout is not turned into a 409', async () => {
    const request = newRequest();
    const error = await caught(
      handleTransactional(store, options, request, async (tx) => {
        await (tx as Database).$executeRawUnsafe('select * from no_such_table_at_all');
        return { result: 1, response: output('1') };
      }),
    );
    expect(error).not.toBeInstanceOf(IdempotencyError);
    expect(await store.find(request)).toBeNull();
  });
});
