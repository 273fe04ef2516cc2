/**
 * Duplicates of a transactional request this process is running (core/running-here.ts): they wait for its
 * answer in memory, holding no connection, and are answered from there only with a response it committed. On
 * the real Postgres store with a pool of 3 connections; the control puts each duplicate on a store object of
 * its own (the same database and pool), so that none of them finds the first one running.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import type { IdempotentRequest, RunOutcome } from '../src/core/request.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import {
  fingerprintRequest,
  IdempotencyError,
  IdempotencyErrorCode,
  type IdempotencyStore,
  type StoredResponse,
} from '../src/index.ts';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../src/prisma/index.ts';
import { connect, connectWithOwnTable, deferred, sleep, uniqueScope } from './support/db.ts';
import { caught, watchSettled } from './support/promises.ts';

type Store = IdempotencyStore<PrismaTransactionLike<Database>>;
const POOL = 3;
let db: Database;
let store: Store;
/** Outside the pool under test: sees which of its connections are inside a claim (see claimsOpen). */
let observer: Database;
let keyTable: string;
beforeAll(async () => {
  db = await connectWithOwnTable(POOL);
  store = createPrismaIdempotencyStore(db);
  observer = connect(1);
  const [row] = await db.$queryRaw<Array<{ schema: string }>>`select current_schema() as schema`;
  keyTable = `"${row?.schema}".idempotency_keys`;
});
afterAll(async () => {
  await db.$disconnect();
  await observer.$disconnect();
});

/** How many connections hold a claim's write lock on this file's key table (a claim in an open transaction). */
async function claimsOpen(): Promise<number> {
  const [row] = await observer.$queryRawUnsafe<Array<{ n: number }>>(
    `select count(distinct pid)::int as n from pg_locks
      where relation = '${keyTable}'::regclass and mode = 'RowExclusiveLock' and granted`,
  );
  return row?.n ?? 0;
}

const options = resolveOptions();
const output = (body: string): StoredResponse => ({ kind: 'output', httpStatus: 200, body });

function newRequest(input: unknown = { n: 1 }, scope = uniqueScope()): IdempotentRequest {
  return {
    scope,
    procedure: 'here.op',
    key: randomUUID(),
    fingerprint: fingerprintRequest('here.op', input),
  };
}

/** A procedure that writes nothing and answers `body`, after `gate` opens; `runs` counts its executions. */
function procedure(body: string, gate: Promise<void> = Promise.resolve()) {
  const counter = { runs: 0 };
  const run = async (): Promise<RunOutcome<string>> => {
    counter.runs += 1;
    await gate;
    return { result: body, response: output(JSON.stringify(body)) };
  };
  return { run, counter };
}

describe('duplicates of a request running in this process', () => {
  it('wait without a connection: another request still gets one while the first holds its transaction (control: each duplicate on its own store object, the pool runs dry)', async () => {
    for (const control of [false, true]) {
      const gate = deferred();
      const request = newRequest();
      const first = procedure('first', gate.promise);
      const running = handleTransactional(store, options, request, first.run);
      // The first one is inside its procedure, holding its transaction's connection.
      await expect.poll(() => first.counter.runs).toBe(1);

      const duplicates = Array.from({ length: 6 }, () =>
        handleTransactional(control ? { ...store } : store, options, request, first.run),
      );
      // Control: the duplicates take the pool's other connections, each waiting on the first one's row.
      if (control) await expect.poll(claimsOpen).toBe(POOL);
      const other = watchSettled(handleTransactional(store, options, newRequest(), procedure('other').run));
      if (control) {
        // The pool is dry: nothing frees a connection before the first one ends.
        await sleep(500);
        expect(other.settled()).toBe(false);
      } else {
        expect(await other.promise).toEqual({ kind: 'executed', result: 'other' });
      }
      gate.resolve();
      expect(await running).toEqual({ kind: 'executed', result: 'first' });
      for (const duplicate of await Promise.all(duplicates))
        expect(duplicate).toEqual({ kind: 'replayed', response: output('"first"') });
      expect(await other.promise).toEqual({ kind: 'executed', result: 'other' });
      expect(first.counter.runs).toBe(1);
    }
  });

  it('the same key with another payload is not answered from here: 422 once the first commits', async () => {
    const gate = deferred();
    const request = newRequest({ n: 1 });
    const first = procedure('first', gate.promise);
    const running = handleTransactional(store, options, request, first.run);
    await expect.poll(() => first.counter.runs).toBe(1);
    const other = { ...request, fingerprint: fingerprintRequest('here.op', { n: 2 }) };
    const reused = caught(handleTransactional(store, options, other, procedure('second').run));
    gate.resolve();
    await running;
    expect(await reused).toMatchObject({ code: IdempotencyErrorCode.keyReused });
  });

  it('the same key of another principal is its own request: it runs', async () => {
    const gate = deferred();
    const request = newRequest();
    const first = procedure('alice', gate.promise);
    const running = handleTransactional(store, options, request, first.run);
    await expect.poll(() => first.counter.runs).toBe(1);
    const bob = procedure('bob');
    expect(await handleTransactional(store, options, { ...request, scope: uniqueScope() }, bob.run)).toEqual({
      kind: 'executed',
      result: 'bob',
    });
    gate.resolve();
    expect(await running).toEqual({ kind: 'executed', result: 'alice' });
  });

  it('when the first one commits nothing, its duplicates go to the database: one of them runs, the rest replay it', async () => {
    const gate = deferred();
    const request = newRequest();
    let runs = 0;
    const failsFirst = async (): Promise<RunOutcome<string>> => {
      runs += 1;
      if (runs === 1) {
        await gate.promise;
        // Not storable (a transient failure): rolled back, the key released.
        return { result: 'failed', response: null };
      }
      return { result: 'second', response: output('"second"') };
    };
    const running = handleTransactional(store, options, request, failsFirst);
    await expect.poll(() => runs).toBe(1);
    const duplicates = Array.from({ length: 4 }, () =>
      handleTransactional(store, options, request, failsFirst),
    );
    gate.resolve();
    expect(await running).toEqual({ kind: 'released', result: 'failed' });
    const answers = await Promise.all(duplicates);
    expect(answers.filter((answer) => answer.kind === 'executed')).toEqual([
      { kind: 'executed', result: 'second' },
    ]);
    expect(answers.filter((answer) => answer.kind === 'replayed')).toHaveLength(3);
    for (const answer of answers)
      if (answer.kind === 'replayed') expect(answer.response).toEqual(output('"second"'));
    expect(runs).toBe(2);
  });

  it('duplicates are answered from memory: the database sees one claim (control: on store objects of their own, one each)', async () => {
    for (const control of [false, true]) {
      let claims = 0;
      const counting: Store = {
        ...store,
        claim: (request, tx) => {
          claims += 1;
          return store.claim(request, tx);
        },
      };
      const gate = deferred();
      const request = newRequest();
      const first = procedure('first', gate.promise);
      const running = handleTransactional(counting, options, request, first.run);
      await expect.poll(() => first.counter.runs).toBe(1);
      const duplicates = Array.from({ length: 2 }, () =>
        handleTransactional(control ? { ...counting } : counting, options, request, first.run),
      );
      gate.resolve();
      await running;
      for (const duplicate of await Promise.all(duplicates))
        expect(duplicate).toEqual({ kind: 'replayed', response: output('"first"') });
      expect(claims).toBe(control ? 3 : 1);
    }
  });

  it('a duplicate answered from memory gets the response as the store keeps it, like every later replay', async () => {
    const gate = deferred();
    const request = newRequest();
    // A stored business error whose cause holds numbers JSON cannot: the key keeps null for them.
    const declined: StoredResponse = {
      kind: 'error',
      httpStatus: 402,
      code: 'PAYMENT_REQUIRED',
      message: 'Card declined',
      cause: { retryInSeconds: Number.POSITIVE_INFINITY, balance: Number.NaN },
    } as StoredResponse;
    let runs = 0;
    const declines = async (): Promise<RunOutcome<string>> => {
      runs += 1;
      await gate.promise;
      return { result: 'declined', response: declined };
    };
    const running = handleTransactional(store, options, request, declines);
    await expect.poll(() => runs).toBe(1);
    const fromMemory = handleTransactional(store, options, request, declines);
    gate.resolve();
    await running;
    const fromDatabase = await handleTransactional(store, options, request, declines);
    expect(fromDatabase).toMatchObject({ kind: 'replayed' });
    expect(await fromMemory).toStrictEqual(fromDatabase);
    expect(runs).toBe(1);
  });

  it('a duplicate waits once: when the first gave up on a lock held elsewhere, it does not start a whole wait again', async () => {
    const quick = resolveOptions({ lockTimeoutMs: 300 });
    const request = newRequest();
    // Another process (a store object of its own) holds the key in its open transaction.
    const elsewhereGate = deferred();
    const elsewhere = procedure('elsewhere', elsewhereGate.promise);
    const holder = handleTransactional({ ...store }, options, request, elsewhere.run);
    await expect.poll(() => elsewhere.counter.runs).toBe(1);

    const lockWaits: number[] = [];
    const watching: Store = {
      ...store,
      transaction: (fn, transactionOptions) => {
        lockWaits.push(transactionOptions.lockTimeoutMs);
        return store.transaction(fn, transactionOptions);
      },
    };
    const here = procedure('here');
    const first = caught(handleTransactional(watching, quick, request, here.run));
    // Arriving a third of the way into the first one's wait: about two thirds of its own are left when the
    // first gives up.
    await sleep(100);
    const duplicate = caught(handleTransactional(watching, quick, request, here.run));
    expect(await first).toMatchObject({ code: IdempotencyErrorCode.inProgress });
    expect(await duplicate).toMatchObject({ code: IdempotencyErrorCode.inProgress });
    // The first waited the whole bound; the duplicate, if it reached the database at all, only what was left.
    expect(lockWaits[0]).toBe(300);
    for (const wait of lockWaits.slice(1)) expect(wait).toBeLessThan(290);
    elsewhereGate.resolve();
    expect(await holder).toEqual({ kind: 'executed', result: 'elsewhere' });
    expect(here.counter.runs).toBe(0);
  });

  it('a duplicate waits as long as it would on the row lock, then 409 + Retry-After', async () => {
    const gate = deferred();
    const quick = resolveOptions({ lockTimeoutMs: 200 });
    const request = newRequest();
    const first = procedure('first', gate.promise);
    const running = handleTransactional(store, quick, request, first.run);
    await expect.poll(() => first.counter.runs).toBe(1);
    const conflict = await caught(handleTransactional(store, quick, request, first.run));
    expect(conflict).toBeInstanceOf(IdempotencyError);
    expect(conflict).toMatchObject({ code: IdempotencyErrorCode.inProgress, retryAfterSeconds: 1 });
    gate.resolve();
    expect(await running).toEqual({ kind: 'executed', result: 'first' });
    expect(first.counter.runs).toBe(1);
  });
});
