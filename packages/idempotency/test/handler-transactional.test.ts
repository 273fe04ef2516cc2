/**
 * Transactional mode's paths around a stored business error, which is recorded in a short transaction of its
 * own after the procedure's transaction rolled back, and its replays. Faults are injected by wrapping the real
 * Postgres store from the test side: the second `transaction()` of a request is the error's record.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import type { IdempotentRequest } from '../src/core/request.ts';
import { handleTransactional, runUnkeyedTransactional } from '../src/core/transactional.ts';
import {
  fingerprintRequest,
  IdempotencyError,
  IdempotencyErrorCode,
  type StoredResponse,
} from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import {
  connectWithOwnTable,
  deferred,
  sleep,
  uniqueScope,
  uniqueTableName,
  waitUntil,
} from './support/db.ts';
import { caught, watchSettled } from './support/promises.ts';

type PrismaStore = ReturnType<typeof createPrismaIdempotencyStore<Database>>;
let db: Database;
let store: PrismaStore;
beforeAll(async () => {
  db = await connectWithOwnTable();
  store = createPrismaIdempotencyStore(db);
});
afterAll(async () => {
  await db.$disconnect();
});

const options = resolveOptions();
const output = (body: string): StoredResponse => ({ kind: 'output', httpStatus: 200, body });
const declined: StoredResponse = {
  kind: 'error',
  httpStatus: 402,
  code: 'PAYMENT_REQUIRED',
  message: 'Card declined',
};

function newRequest(): IdempotentRequest {
  return {
    scope: uniqueScope(),
    procedure: 'tx.op',
    key: randomUUID(),
    fingerprint: fingerprintRequest('tx.op', { n: 1 }),
  };
}

/** The store, with `beforeRecord` run in place of (or before) the request's second transaction: the error's record. */
function aroundErrorRecord(beforeRecord: () => Promise<void>): PrismaStore {
  let transactions = 0;
  return {
    ...store,
    transaction: async (fn, transactionOptions) => {
      transactions += 1;
      if (transactions === 2) await beforeRecord();
      return store.transaction(fn, transactionOptions);
    },
  };
}

const declines = async () => ({ result: 'declined', response: declined });

describe('recording a stored error after the rollback', () => {
  it('a database failure there reaches the caller as that failure, not as "in progress"', async () => {
    const request = newRequest();
    const lost = new Error('Connection terminated unexpectedly');
    const failing = aroundErrorRecord(async () => {
      throw lost;
    });
    expect(await caught(handleTransactional(failing, options, request, declines))).toBe(lost);
    // Nothing was recorded: the key is free, and a retry runs the procedure again.
    expect(await store.find(request)).toBeNull();
  });

  it('a lock timeout there is 409 + Retry-After (the key is held by a running duplicate)', async () => {
    const request = newRequest();
    const lockTimeout = Object.assign(new Error('canceling statement due to lock timeout'), {
      code: '55P03',
    });
    const failing = aroundErrorRecord(async () => {
      throw lockTimeout;
    });
    const error = await caught(
      handleTransactional(failing, resolveOptions({ retryAfterSeconds: 3 }), request, declines),
    );
    expect(error).toBeInstanceOf(IdempotencyError);
    expect(error).toMatchObject({
      code: IdempotencyErrorCode.inProgress,
      httpStatus: 409,
      retryAfterSeconds: 3,
    });
  });

  it("when a duplicate ran and completed the key in between, the caller gets the duplicate's stored result", async () => {
    const request = newRequest();
    const racing = aroundErrorRecord(async () => {
      const duplicate = await handleTransactional(store, options, request, async () => ({
        result: 'paid',
        response: output('"paid"'),
      }));
      expect(duplicate).toEqual({ kind: 'executed', result: 'paid' });
    });
    expect(await handleTransactional(racing, options, request, declines)).toEqual({
      kind: 'replayed',
      response: output('"paid"'),
    });
    // One committed outcome, the duplicate's, for every caller; the decline was never stored.
    expect(await store.find(request)).toMatchObject({ state: 'completed', response: output('"paid"') });
    await waitUntil(async () => (await store.find(request))?.replayCount === 1);
  });

  it('when a duplicate holds the key in flight in between, the caller gets 409 and nothing is overwritten', async () => {
    const request = newRequest();
    const duplicateOwner = randomUUID();
    const racing = aroundErrorRecord(async () => {
      // An external-mode duplicate's committed claim under a live lease.
      await store.claim({ ...request, owner: duplicateOwner, leaseSeconds: 30, retentionSeconds: 3_600 });
    });
    expect(await caught(handleTransactional(racing, options, request, declines))).toMatchObject({
      code: IdempotencyErrorCode.inProgress,
    });
    expect(await store.find(request)).toMatchObject({ state: 'processing', leaseOwner: duplicateOwner });
  });

  it('without a race the error is recorded: executed for this caller, replayed (and counted) for the next', async () => {
    const request = newRequest();
    expect(await handleTransactional(store, options, request, declines)).toEqual({
      kind: 'executed',
      result: 'declined',
    });
    expect(await handleTransactional(store, options, request, declines)).toEqual({
      kind: 'replayed',
      response: declined,
    });
    await waitUntil(async () => (await store.find(request))?.replayCount === 1);
  });
});

describe('replays', () => {
  it('a replay is counted, and the procedure runs for the execution only', async () => {
    const request = newRequest();
    let runs = 0;
    const run = async () => {
      runs += 1;
      return { result: runs, response: output(String(runs)) };
    };
    expect(await handleTransactional(store, options, request, run)).toEqual({ kind: 'executed', result: 1 });
    for (let replay = 1; replay <= 2; replay += 1) {
      expect(await handleTransactional(store, options, request, run)).toEqual({
        kind: 'replayed',
        response: output('1'),
      });
    }
    expect(runs).toBe(1);
    await waitUntil(async () => (await store.find(request))?.replayCount === 2);
  });
});

/**
 * The store, with the end of every transaction held open until `release` resolves: the callback has returned
 * (or thrown), the COMMIT or ROLLBACK has not been sent. `ended` counts the transactions that did end.
 */
function holdingTransactionEnds(release: Promise<void>, endWith?: Error) {
  const watch = { ended: 0 };
  const holding: PrismaStore = {
    ...store,
    transaction: async (fn, transactionOptions) => {
      const ended = await store
        .transaction(async (tx) => {
          try {
            return await fn(tx);
          } finally {
            await release;
          }
        }, transactionOptions)
        .then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
      watch.ended += 1;
      if (endWith) throw endWith;
      if ('error' in ended) throw ended.error;
      return ended.value;
    },
  };
  return { holding, watch };
}

describe('a duplicate is answered when its claim returns, not when its transaction ends', () => {
  it('a replay, a 422 and a 409 answer while their transactions are still open (control: a first execution waits)', async () => {
    const release = deferred();
    const { holding, watch } = holdingTransactionEnds(release.promise);
    const request = newRequest();
    await handleTransactional(store, options, request, async () => ({ result: 1, response: output('1') }));
    const neverRuns = async () => {
      throw new Error('a duplicate must not run the procedure');
    };

    expect(await handleTransactional(holding, options, request, neverRuns)).toEqual({
      kind: 'replayed',
      response: output('1'),
    });
    const reused = { ...request, fingerprint: fingerprintRequest('tx.op', { n: 2 }) };
    expect(await caught(handleTransactional(holding, options, reused, neverRuns))).toMatchObject({
      code: IdempotencyErrorCode.keyReused,
    });
    // A key in flight under an external-mode lease: 409 from the claim, as well.
    const inFlight = newRequest();
    await store.claim({
      ...inFlight,
      owner: randomUUID(),
      leaseSeconds: 60,
      retentionSeconds: 3600,
    });
    expect(await caught(handleTransactional(holding, options, inFlight, neverRuns))).toMatchObject({
      code: IdempotencyErrorCode.inProgress,
    });
    expect(watch.ended).toBe(0);

    // Control: through the same held transactions, a first execution has no answer until its COMMIT.
    const first = watchSettled(
      handleTransactional(holding, options, newRequest(), async () => ({ result: 2, response: output('2') })),
    );
    await sleep(200);
    expect(first.settled()).toBe(false);
    release.resolve();
    expect(await first.promise).toEqual({ kind: 'executed', result: 2 });
    await waitUntil(() => watch.ended === 4);
  });

  it('a store that cannot answer before the end (SQLite: one connection) answers once the transaction has ended', async () => {
    const release = deferred();
    const { holding, watch } = holdingTransactionEnds(release.promise);
    const oneConnection: PrismaStore = { ...holding, answersDuplicatesAtClaim: false };
    const request = newRequest();
    await handleTransactional(store, options, request, async () => ({ result: 1, response: output('1') }));
    const replay = watchSettled(
      handleTransactional(oneConnection, options, request, async () => ({
        result: 2,
        response: output('2'),
      })),
    );
    await sleep(200);
    expect(replay.settled()).toBe(false);
    release.resolve();
    expect(await replay.promise).toEqual({ kind: 'replayed', response: output('1') });
    expect(watch.ended).toBe(1);
  });

  it("a failure ending a duplicate's transaction is nobody's answer (control: a first execution's is its caller's)", async () => {
    const failure = new Error('connection lost at the end of the transaction');
    const { holding, watch } = holdingTransactionEnds(Promise.resolve(), failure);
    const request = newRequest();
    await handleTransactional(store, options, request, async () => ({ result: 1, response: output('1') }));

    expect(
      await handleTransactional(holding, options, request, async () => ({
        result: 2,
        response: output('2'),
      })),
    ).toEqual({ kind: 'replayed', response: output('1') });
    await waitUntil(() => watch.ended === 1);

    const fresh = newRequest();
    expect(
      await caught(
        handleTransactional(holding, options, fresh, async () => ({ result: 3, response: output('3') })),
      ),
    ).toBe(failure);
  });
});

describe('an unkeyed request let through (missingKey: passthrough)', () => {
  async function effectsTable(): Promise<string> {
    const table = uniqueTableName('unkeyed_effects');
    await db.$executeRawUnsafe(`create table "${table}" (note text not null)`);
    return table;
  }
  const count = async (table: string) =>
    (await db.$queryRawUnsafe<Array<{ n: number }>>(`select count(*)::int as n from "${table}"`))[0]?.n;

  it.each([
    ['a success keeps its writes', output('"ok"'), 1],
    ['a business error rolls its writes back', declined, 0],
    ['a transient failure rolls its writes back', null, 0],
  ])('%s', async (_case, response, rowsAfter) => {
    const table = await effectsTable();
    const result = await runUnkeyedTransactional(store, options, async (tx) => {
      await tx.$executeRawUnsafe(`insert into "${table}" (note) values ('effect')`);
      return { result: 'the result', response };
    });
    expect(result).toBe('the result');
    expect(await count(table)).toBe(rowsAfter);
  });

  it('a run that throws rejects with its error and rolls its writes back', async () => {
    const table = await effectsTable();
    const failure = new Error('adapter bug');
    expect(
      await caught(
        runUnkeyedTransactional(store, options, async (tx) => {
          await tx.$executeRawUnsafe(`insert into "${table}" (note) values ('effect')`);
          throw failure;
        }),
      ),
    ).toBe(failure);
    expect(await count(table)).toBe(0);
  });
});
