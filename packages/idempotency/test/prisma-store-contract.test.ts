/**
 * The Postgres store's promises that its main suite (prisma-store.test.ts) leaves implicit: the transaction
 * bounds are ours (not Prisma's 2 s / 5 s defaults), every form a lock timeout reaches us in is recognised, a
 * failed partition check is tried again, a stored error keeps its HTTP status, a schema-qualified table works,
 * and a duplicate's claim is one statement that writes nothing.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import { handleExternal } from '../src/core/external.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import { type ClaimRequest, fingerprintRequest, type RecordKey, type StoredResponse } from '../src/index.ts';
import { createPrismaIdempotencyStore, idempotencyKeysSchema } from '../src/prisma/index.ts';
import { connectWithOwnTable, deferred, sleep, uniqueScope, uniqueTableName } from './support/db.ts';
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

const procedure = 'contract.op';
const output: StoredResponse = { kind: 'output', httpStatus: 200, body: '{"id":1}' };
const outOfStock: StoredResponse = {
  kind: 'error',
  httpStatus: 422,
  code: 'UNPROCESSABLE_CONTENT',
  message: 'Out of stock',
};

function claimRequest(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope: uniqueScope(),
    procedure,
    key: randomUUID(),
    fingerprint: fingerprintRequest(procedure, { n: 1 }),
    owner: randomUUID(),
    leaseSeconds: 30,
    retentionSeconds: 3_600,
    ...overrides,
  };
}

async function httpStatusOfRow(
  key: RecordKey,
  table = 'idempotency_keys',
): Promise<number | null | undefined> {
  const rows = await db.$queryRawUnsafe<Array<{ http_status: number | null }>>(
    `select http_status from ${table} where scope = $1 and procedure = $2 and key = $3`,
    key.scope,
    key.procedure,
    key.key,
  );
  return rows[0]?.http_status;
}

describe('transaction bounds', () => {
  it('a transaction is closed past timeoutMs + lockTimeoutMs (ours), not at Prisma’s 5 s default', async () => {
    // A connection in the pool first: timeoutMs also bounds the wait for one (maxWait), and opening a new
    // connection on a loaded machine could take longer than that, so that the transaction never started.
    await store.transaction(async (tx) => tx.$queryRawUnsafe('select 1'), {
      lockTimeoutMs: 100,
      timeoutMs: 5_000,
    });
    const statementAfterTimeout = deferred<unknown>();
    let started = false;
    const error = await caught(
      store.transaction(
        async (tx) => {
          started = true;
          // Past the 1.5 s bound: its timer starts before this one in this same process, so it always fires
          // first however loaded the machine (Prisma settles the transaction only once this callback ends).
          await sleep(3_000);
          const late = await caught(Promise.resolve(tx.$queryRawUnsafe('select 1')));
          statementAfterTimeout.resolve(late);
          throw late;
        },
        { lockTimeoutMs: 500, timeoutMs: 1_000 },
      ),
    );
    expect(started, `the transaction never started: ${String(error)}`).toBe(true);
    expect(String(error)).toMatch(/transaction/i);
    // The statement sent after the bound found the transaction closed.
    expect(String(await statementAfterTimeout.promise)).toMatch(/transaction/i);
  });

  it('a transaction may last up to timeoutMs + lockTimeoutMs: the lock wait comes on top of the timeout', async () => {
    await store.transaction(async (tx) => tx.$queryRawUnsafe('select 1'), {
      lockTimeoutMs: 100,
      timeoutMs: 5_000,
    });
    const result = await store.transaction(
      async (tx) => {
        // The work under test: it lasts at least 1.5 s, so past timeoutMs whatever the load (a store bounding
        // the transaction by timeoutMs alone fails here every time), and the bound it must stay inside,
        // timeoutMs + lockTimeoutMs, is 21 s: only a hang reaches it. timeoutMs is also the start bound
        // (maxWait), wide enough for a loaded machine to start the transaction.
        await sleep(1_500);
        return tx.$queryRawUnsafe<Array<{ one: number }>>('select 1 as one');
      },
      { lockTimeoutMs: 20_000, timeoutMs: 1_000 },
    );
    expect(result).toEqual([{ one: 1 }]);
  });

  it('waiting for a connection may last timeoutMs (Prisma’s maxWait is ours, not its 2 s default)', async () => {
    const single = await connectWithOwnTable(1);
    const singleStore = createPrismaIdempotencyStore(single);
    try {
      const holding = deferred();
      const release = deferred();
      const blocker = singleStore.transaction(
        async () => {
          holding.resolve();
          await release.promise;
        },
        { lockTimeoutMs: 1_000, timeoutMs: 15_000 },
      );
      await holding.promise;
      // The only connection is taken; this transaction may wait for it up to 10 s.
      const waiting = singleStore.transaction(
        async (tx) => tx.$queryRawUnsafe<Array<{ one: number }>>('select 1 as one'),
        { lockTimeoutMs: 100, timeoutMs: 10_000 },
      );
      // Released only after Prisma's default wait would have given up.
      await sleep(2_500);
      release.resolve();
      await blocker;
      expect(await waiting).toEqual([{ one: 1 }]);
    } finally {
      await single.$disconnect();
    }
  });
});

describe('isLockTimeout', () => {
  const message = 'canceling statement due to lock timeout';
  it.each([
    ['the SQLSTATE as code', { code: '55P03' }],
    ['the SQLSTATE as originalCode (a driver adapter error)', { originalCode: '55P03' }],
    ['the SQLSTATE in the message only', new Error('Raw query failed. Code: `55P03`.')],
    ['only the server’s message text', new Error(message)],
    ['in the cause chain', new Error('Transaction failed', { cause: { code: '55P03' } })],
    [
      'in Prisma’s meta.driverAdapterError',
      { message: 'wrapped', meta: { driverAdapterError: { code: '55P03' } } },
    ],
  ])('recognises %s', (_form, error) => {
    expect(store.isLockTimeout(error)).toBe(true);
  });

  it.each([
    ['another SQLSTATE', { code: '40001', message: 'could not serialize access' }],
    [
      'a cycle of causes without it',
      (() => {
        const a: { message: string; cause?: unknown } = { message: 'a' };
        a.cause = { message: 'b', cause: a };
        return a;
      })(),
    ],
    ['no error at all', undefined],
  ])('does not take %s for one', (_form, error) => {
    expect(store.isLockTimeout(error)).toBe(false);
  });

  it('recognises the real one: a duplicate blocked past lock_timeout on an uncommitted claim', async () => {
    const request = claimRequest();
    const holding = deferred();
    const release = deferred();
    const first = store.transaction(
      async (tx) => {
        await store.claim(request, tx);
        holding.resolve();
        await release.promise;
      },
      { lockTimeoutMs: 5_000, timeoutMs: 10_000 },
    );
    await holding.promise;
    const error = await caught(
      store.transaction((tx) => store.claim({ ...request, owner: randomUUID() }, tx), {
        lockTimeoutMs: 50,
        timeoutMs: 5_000,
      }),
    );
    release.resolve();
    await first;
    expect(store.isLockTimeout(error)).toBe(true);
  });
});

describe('the partition check of the expired-key delete', () => {
  it('a failed check (connection lost) is tried again on the next call, not cached as failed', async () => {
    let failNextCheck = true;
    const flaky: Database = new Proxy(db, {
      get(target, property, receiver) {
        if (property === '$queryRawUnsafe')
          return (query: string, ...values: unknown[]) => {
            if (failNextCheck && query.includes('pg_class')) {
              failNextCheck = false;
              return Promise.reject(new Error('Connection terminated unexpectedly'));
            }
            return target.$queryRawUnsafe(query, ...values);
          };
        return Reflect.get(target, property, receiver);
      },
    });
    const flakyStore = createPrismaIdempotencyStore(flaky);
    expect(await caught(flakyStore.deleteExpiredBatch(10))).toMatchObject({
      message: 'Connection terminated unexpectedly',
    });
    expect(typeof (await flakyStore.deleteExpiredBatch(10))).toBe('number');
  });

  it('a check that passed is made once per store, not once per batch', async () => {
    const checks: string[] = [];
    const counting: Database = new Proxy(db, {
      get(target, property, receiver) {
        if (property === '$queryRawUnsafe')
          return (query: string, ...values: unknown[]) => {
            if (query.includes('pg_class')) checks.push(query);
            return target.$queryRawUnsafe(query, ...values);
          };
        return Reflect.get(target, property, receiver);
      },
    });
    const countingStore = createPrismaIdempotencyStore(counting);
    for (let batch = 0; batch < 3; batch += 1) await countingStore.deleteExpiredBatch(10);
    expect(checks).toHaveLength(1);
    // Another store checks for itself.
    await createPrismaIdempotencyStore(counting).deleteExpiredBatch(10);
    expect(checks).toHaveLength(2);
  });
});

describe('http_status', () => {
  it('is stored for a business error in transactional mode', async () => {
    const request = claimRequest();
    await handleTransactional(store, resolveOptions(), request, async () => ({
      result: 'out of stock',
      response: outOfStock,
    }));
    expect(await httpStatusOfRow(request)).toBe(422);
  });

  it('is stored for a success in transactional mode and on completion in external mode', async () => {
    const transactional = claimRequest();
    await handleTransactional(store, resolveOptions(), transactional, async () => ({
      result: 1,
      response: output,
    }));
    expect(await httpStatusOfRow(transactional)).toBe(200);
    const external = claimRequest();
    await handleExternal(store, resolveOptions(), external, async () => ({
      result: 1,
      response: outOfStock,
    }));
    expect(await httpStatusOfRow(external)).toBe(422);
  });
});

describe('a schema-qualified table', () => {
  it('claims, completes, replays, counts, releases and cleans up in that schema, whatever the search_path', async () => {
    const schema = uniqueTableName('idem_other');
    const table = `${schema}.keys`;
    await db.$executeRawUnsafe(`create schema "${schema}"`);
    for (const statement of idempotencyKeysSchema(table).statements) await db.$executeRawUnsafe(statement);
    const qualified = createPrismaIdempotencyStore(db, { table });

    const request = claimRequest();
    expect(await qualified.claim(request)).toEqual({ claimed: true, takeover: false });
    expect(await qualified.complete(request, request.owner, output)).toBe(true);
    expect(await qualified.claim({ ...request, owner: randomUUID() })).toMatchObject({
      claimed: false,
      record: { state: 'completed', response: output },
    });
    await qualified.countReplay(request, 1);
    expect(await qualified.find(request)).toMatchObject({ replayCount: 1 });
    expect(await httpStatusOfRow(request, `"${schema}"."keys"`)).toBe(200);

    const released = claimRequest();
    await qualified.claim(released);
    expect(await qualified.release(released, released.owner)).toBe(true);
    expect(await qualified.find(released)).toBeNull();

    const expired = claimRequest({ retentionSeconds: 0.001 });
    await qualified.claim(expired);
    await qualified.complete(expired, expired.owner, output);
    await sleep(5);
    expect(await qualified.deleteExpiredBatch(100)).toBe(1);
    // The connection's own search_path table was never touched.
    expect(await store.find(request)).toBeNull();
  });

  it('control: the same store on the bare name does not find the table (it is in another schema)', async () => {
    const schema = uniqueTableName('idem_other');
    await db.$executeRawUnsafe(`create schema "${schema}"`);
    for (const statement of idempotencyKeysSchema(`${schema}.keys`).statements)
      await db.$executeRawUnsafe(statement);
    const bare = createPrismaIdempotencyStore(db, { table: 'keys' });
    expect(String(await caught(bare.claim(claimRequest())))).toMatch(/keys/);
  });
});

describe('a duplicate’s claim', () => {
  /** The row's physical version: a write of any kind (even a no-op UPDATE) gives it a new xmin and ctid. */
  async function rowVersion(key: RecordKey): Promise<string> {
    const rows = await db.$queryRawUnsafe<Array<{ version: string }>>(
      `select xmin::text || '@' || ctid::text as version from idempotency_keys
       where scope = $1 and procedure = $2 and key = $3`,
      key.scope,
      key.procedure,
      key.key,
    );
    return rows[0]?.version ?? 'no row';
  }

  /** The store on a client that counts the statements sent through it. */
  function countingStore() {
    const statements: string[] = [];
    const counting: Database = new Proxy(db, {
      get(target, property, receiver) {
        if (property === '$queryRawUnsafe' || property === '$executeRawUnsafe')
          return (query: string, ...values: unknown[]) => {
            statements.push(query);
            return property === '$queryRawUnsafe'
              ? target.$queryRawUnsafe(query, ...values)
              : target.$executeRawUnsafe(query, ...values);
          };
        return Reflect.get(target, property, receiver);
      },
    });
    return { statements, counting: createPrismaIdempotencyStore(counting) };
  }

  it('of a completed key is one statement and writes nothing: the row keeps its version', async () => {
    const request = claimRequest();
    await store.claim(request);
    await store.complete(request, request.owner, output);
    const before = await rowVersion(request);
    const { statements, counting } = countingStore();
    expect(await counting.claim({ ...request, owner: randomUUID() })).toMatchObject({ claimed: false });
    expect(statements).toHaveLength(1);
    expect(await rowVersion(request)).toBe(before);
  });

  it('of a key in flight is one statement and writes nothing either', async () => {
    const request = claimRequest();
    await store.claim(request);
    const before = await rowVersion(request);
    const { statements, counting } = countingStore();
    expect(await counting.claim({ ...request, owner: randomUUID() })).toMatchObject({
      claimed: false,
      record: { state: 'processing', leaseActive: true },
    });
    expect(statements).toHaveLength(1);
    expect(await rowVersion(request)).toBe(before);
  });

  it('control: a takeover of an expired key does write — the check sees a write when there is one', async () => {
    const request = claimRequest({ retentionSeconds: 0.001 });
    await store.claim(request);
    await store.complete(request, request.owner, output);
    await sleep(5);
    const before = await rowVersion(request);
    const { statements, counting } = countingStore();
    expect(await counting.claim({ ...request, owner: randomUUID() })).toEqual({
      claimed: true,
      takeover: true,
    });
    expect(statements).toHaveLength(2);
    expect(await rowVersion(request)).not.toBe(before);
  });
});
