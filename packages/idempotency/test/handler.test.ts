/**
 * The framework-free lifecycle (core/handler.ts) on the real Postgres store, for the paths an adapter cannot
 * easily reach: a `run` that throws, a store that fails mid-way, a released key while a duplicate waits.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import { handleExternal, handleTransactional, type IdempotentRequest } from '../src/core/handler.ts';
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

describe('handleTransactional: the completed read beside the transaction (findCompleted)', () => {
  const executeOnce = async (request: IdempotentRequest) => {
    await handleTransactional(store, options, request, async () => ({
      result: 'first',
      response: output('"first"'),
    }));
  };
  /** The real store, with its completed read on (off by default), whose transactions wait for `gate`. */
  const gatedTransactions = (gate: Promise<void>): IdempotencyStore<unknown> => ({
    ...(createPrismaIdempotencyStore(db, { completedRead: true }) as IdempotencyStore<unknown>),
    transaction: async (fn, transactionOptions) => {
      await gate;
      return (store as IdempotencyStore<unknown>).transaction(fn, transactionOptions);
    },
  });

  it('is off by default on the Prisma store, on with completedRead: true', () => {
    expect(createPrismaIdempotencyStore(db).findCompleted).toBeUndefined();
    expect(createPrismaIdempotencyStore(db, { completedRead: true }).findCompleted).toBeTypeOf('function');
  });

  it('answers a duplicate of a finished request before its transaction has even started', async () => {
    const request = newRequest();
    await executeOnce(request);
    const gate = deferred();
    const answered = await handleTransactional(
      gatedTransactions(gate.promise),
      options,
      request,
      async () => {
        throw new Error('a replay must not run the procedure');
      },
    );
    expect(answered).toEqual({ kind: 'replayed', response: output('"first"') });
    gate.resolve();
  });

  it('control: without findCompleted the same duplicate waits for its transaction', async () => {
    const request = newRequest();
    await executeOnce(request);
    const gate = deferred();
    const { findCompleted: _without, ...withoutRead } = gatedTransactions(gate.promise);
    let answered = false;
    const handled = handleTransactional(withoutRead, options, request, async () => {
      throw new Error('a replay must not run the procedure');
    }).then((result) => {
      answered = true;
      return result;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(answered).toBe(false);
    gate.resolve();
    expect(await handled).toEqual({ kind: 'replayed', response: output('"first"') });
  });

  it('a transaction whose claim returns after the read answered runs nothing, even when it claimed', async () => {
    // The read says "completed" for a key that has no row (as if it expired right after the read): the claim
    // then claims it, and must roll back instead of running a procedure whose result nobody would get.
    const request = newRequest();
    const staleRecord = {
      ...request,
      state: 'completed' as const,
      response: output('"seen by the read"'),
      leaseOwner: null,
      leaseActive: false,
      createdAt: new Date(),
      expiresAt: new Date(),
      replayCount: 0,
    };
    // The read comes back once the claim is on its way; the claim's answer is held until the read has answered.
    const claimSent = deferred();
    const answered = deferred();
    const claimed = deferred();
    const readFirst: IdempotencyStore<unknown> = {
      ...(store as IdempotencyStore<unknown>),
      findCompleted: async () => {
        await claimSent.promise;
        return staleRecord;
      },
      claim: async (claimRequest, tx) => {
        claimSent.resolve();
        await answered.promise;
        const result = await store.claim(claimRequest, tx as never);
        claimed.resolve();
        return result;
      },
    };
    let runs = 0;
    const handled = await handleTransactional(readFirst, options, request, async () => {
      runs += 1;
      return { result: 'second', response: output('"second"') };
    });
    answered.resolve();
    expect(handled).toEqual({ kind: 'replayed', response: output('"seen by the read"') });
    await claimed.promise;
    await waitUntil(async () => (await store.find(request)) === null);
    expect(runs).toBe(0);
  });

  it('a replay answered while its transaction is still opening sends no claim', async () => {
    const request = newRequest();
    await executeOnce(request);
    const gate = deferred();
    const transactionDone = deferred();
    let claims = 0;
    const counted: IdempotencyStore<unknown> = {
      ...gatedTransactions(gate.promise),
      claim: (claimRequest, tx) => {
        claims += 1;
        return store.claim(claimRequest, tx as never);
      },
    };
    const gated = counted.transaction.bind(counted);
    counted.transaction = (fn, transactionOptions) =>
      gated(fn, transactionOptions).finally(() => transactionDone.resolve());
    const handled = await handleTransactional(counted, options, request, async () => {
      throw new Error('a replay must not run the procedure');
    });
    expect(handled).toEqual({ kind: 'replayed', response: output('"first"') });
    gate.resolve();
    await transactionDone.promise;
    expect(claims).toBe(0);
  });

  it('a completed read that finds nothing decides nothing: the first request runs in its transaction and is stored', async () => {
    const request = newRequest();
    // The transaction opens only once the read has come back empty, so the read answers first.
    const readReturned = deferred();
    const withRead = createPrismaIdempotencyStore(db, { completedRead: true });
    const subject: IdempotencyStore<unknown> = {
      ...gatedTransactions(readReturned.promise),
      findCompleted: async (key) => {
        try {
          return (await withRead.findCompleted?.(key)) ?? null;
        } finally {
          readReturned.resolve();
        }
      },
    };
    let runs = 0;
    const handled = await handleTransactional(subject, options, request, async () => {
      runs += 1;
      return { result: 'first', response: output('"first"') };
    });
    expect(handled).toEqual({ kind: 'executed', result: 'first' });
    expect(runs).toBe(1);
    expect(await store.find(request)).toMatchObject({ state: 'completed', response: output('"first"') });
  });

  it('a failed completed read decides nothing: the transaction answers the duplicate', async () => {
    const request = newRequest();
    await executeOnce(request);
    const failingRead: IdempotencyStore<unknown> = {
      ...(store as IdempotencyStore<unknown>),
      findCompleted: async () => {
        throw new Error('connection lost');
      },
    };
    expect(
      await handleTransactional(failingRead, options, request, async () => {
        throw new Error('a replay must not run the procedure');
      }),
    ).toEqual({ kind: 'replayed', response: output('"first"') });
  });

  it("a completed record the read brings back after the claim decided is nobody's answer: the execution is", async () => {
    // The claim claims (the key is free in the transaction's view); the read, on its own connection, comes back
    // afterwards with a completed record (as if from before an expiry) while the procedure is still running.
    const request = newRequest();
    const staleRecord = {
      ...request,
      state: 'completed' as const,
      response: output('"seen by the read"'),
      leaseOwner: null,
      leaseActive: false,
      createdAt: new Date(),
      expiresAt: new Date(),
      replayCount: 0,
    };
    const claimReturned = deferred();
    const readReturned = deferred();
    const readLate: IdempotencyStore<unknown> = {
      ...(store as IdempotencyStore<unknown>),
      findCompleted: async () => {
        await claimReturned.promise;
        readReturned.resolve();
        return staleRecord;
      },
      claim: async (claimRequest, tx) => {
        const result = await store.claim(claimRequest, tx as never);
        claimReturned.resolve();
        return result;
      },
    };
    const handled = await handleTransactional(readLate, options, request, async () => {
      await readReturned.promise;
      return { result: 'executed', response: output('"executed"') };
    });
    expect(handled).toEqual({ kind: 'executed', result: 'executed' });
    expect(await store.find(request)).toMatchObject({ state: 'completed', response: output('"executed"') });
  });

  it('a replay answered by the read leaves no unhandled rejection when its rolled-back transaction then fails', async () => {
    const request = newRequest();
    await executeOnce(request);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const gate = deferred();
      const transactionFailed = deferred();
      const failingTransaction: IdempotencyStore<unknown> = {
        ...gatedTransactions(gate.promise),
        transaction: async () => {
          await gate.promise;
          transactionFailed.resolve();
          throw new Error('connection lost while opening the transaction');
        },
      };
      const handled = await handleTransactional(failingTransaction, options, request, async () => {
        throw new Error('a replay must not run the procedure');
      });
      expect(handled).toEqual({ kind: 'replayed', response: output('"first"') });
      gate.resolve();
      await transactionFailed.promise;
      // Node reports an unhandled rejection once the microtasks of its turn have run: let two turns pass.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('control: the same claim, with the read coming back after it, runs the procedure and stores it', async () => {
    const request = newRequest();
    const readAfterClaim = deferred();
    const readLast: IdempotencyStore<unknown> = {
      ...(store as IdempotencyStore<unknown>),
      findCompleted: async () => {
        await readAfterClaim.promise;
        return null;
      },
      claim: async (claimRequest, tx) => {
        const result = await store.claim(claimRequest, tx as never);
        readAfterClaim.resolve();
        return result;
      },
    };
    let runs = 0;
    const answered = await handleTransactional(readLast, options, request, async () => {
      runs += 1;
      return { result: 'second', response: output('"second"') };
    });
    expect(answered).toEqual({ kind: 'executed', result: 'second' });
    expect(runs).toBe(1);
    expect((await store.find(request))?.state).toBe('completed');
  });
});
