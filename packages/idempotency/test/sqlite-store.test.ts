/**
 * The SQLite store's contract, on a real SQLite file through Prisma's better-sqlite3 adapter: the same claim /
 * complete / fencing / takeover / cap / cleanup rules as the Postgres store (prisma-store.test.ts), each with
 * its control.
 */
import { randomUUID } from 'node:crypto';
import type { SqliteDatabase } from '@idem/db-sqlite';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ClaimRequest, fingerprintRequest, type RecordKey, type StoredResponse } from '../src/index.ts';
import {
  cleanupExpiredKeys,
  createSqliteIdempotencyStore,
  SqliteIdempotencyTableMissingError,
} from '../src/sqlite/index.ts';
import { deferred, uniqueScope } from './support/db.ts';
import { connectSqlite } from './support/sqlite-db.ts';

let db: SqliteDatabase;
let store: ReturnType<typeof createSqliteIdempotencyStore<SqliteDatabase>>;

beforeAll(async () => {
  ({ db } = await connectSqlite());
  store = createSqliteIdempotencyStore(db);
});
afterAll(async () => {
  await db.$disconnect();
});

const procedure = 'orders.place';
const fingerprintA = fingerprintRequest(procedure, { a: 1 });
const fingerprintB = fingerprintRequest(procedure, { a: 2 });
const output: StoredResponse = { kind: 'output', httpStatus: 200, body: '{"json":{"id":1}}' };

function claimRequest(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope: uniqueScope(),
    procedure,
    key: randomUUID(),
    fingerprint: fingerprintA,
    owner: randomUUID(),
    leaseSeconds: 30,
    retentionSeconds: 3_600,
    ...overrides,
  };
}

const keyOf = ({ scope, procedure, key }: RecordKey): RecordKey => ({ scope, procedure, key });
const NOW = `strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')`;
const nowPlus = (seconds: number) => `strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '${seconds} seconds')`;

function updateRow(key: RecordKey, set: string, table = 'idempotency_keys') {
  return db.$executeRawUnsafe(
    `update "${table}" set ${set} where scope = ? and procedure = ? and key = ?`,
    key.scope,
    key.procedure,
    key.key,
  );
}

async function rowCount(key: RecordKey, table = 'idempotency_keys'): Promise<number> {
  const rows = await db.$queryRawUnsafe<Array<{ n: bigint | number }>>(
    `select count(*) as n from "${table}" where scope = ? and procedure = ? and key = ?`,
    key.scope,
    key.procedure,
    key.key,
  );
  return Number(rows[0]?.n ?? -1);
}

describe('claim', () => {
  it('inserts a processing record owned by the claimer, with a live lease', async () => {
    const request = claimRequest();
    expect(await store.find(keyOf(request))).toBeNull();
    expect(await store.claim(request)).toEqual({ claimed: true, takeover: false });
    const record = await store.find(keyOf(request));
    expect(record).toMatchObject({
      ...keyOf(request),
      fingerprint: fingerprintA,
      state: 'processing',
      response: null,
      leaseOwner: request.owner,
      leaseActive: true,
      replayCount: 0,
    });
    expect(record?.createdAt).toBeInstanceOf(Date);
  });

  it('a second claim of the same key returns the existing record, never overwrites it', async () => {
    const first = claimRequest();
    await store.claim(first);
    for (const second of [
      { ...first, owner: randomUUID() },
      { ...first, owner: randomUUID(), fingerprint: fingerprintB },
    ]) {
      const result = await store.claim(second);
      expect(result.claimed).toBe(false);
      if (!result.claimed)
        expect(result.record).toMatchObject({
          fingerprint: fingerprintA,
          leaseOwner: first.owner,
          leaseActive: true,
        });
    }
    expect(await rowCount(first)).toBe(1);
  });

  it('keys are scoped by (scope, procedure, key)', async () => {
    const first = claimRequest();
    await store.claim(first);
    for (const other of [{ scope: uniqueScope() }, { procedure: 'orders.other' }, { key: randomUUID() }])
      expect(await store.claim({ ...first, owner: randomUUID(), ...other })).toEqual({
        claimed: true,
        takeover: false,
      });
    expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);
  });

  it("takes all times from SQLite's clock, to the millisecond, not the app's clock", async () => {
    const request = claimRequest({ leaseSeconds: 45.5, retentionSeconds: 7_200 });
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2000-01-01T00:00:00Z') });
    try {
      await store.claim(request);
    } finally {
      vi.useRealTimers();
    }
    const [row] = await db.$queryRawUnsafe<
      Array<{ retention: number; lease: number; age: number; created: string }>
    >(
      `select (julianday(expires_at) - julianday(created_at)) * 86400 as retention,
              (julianday(locked_until) - julianday(created_at)) * 86400 as lease,
              (julianday('now') - julianday(created_at)) * 86400 as age, cast(created_at as text) as created
       from idempotency_keys where scope = ? and procedure = ? and key = ?`,
      request.scope,
      request.procedure,
      request.key,
    );
    expect(row?.retention).toBeCloseTo(7_200, 2);
    expect(row?.lease).toBeCloseTo(45.5, 2);
    expect(row?.age).toBeGreaterThanOrEqual(0);
    expect(row?.age).toBeLessThan(60);
    // ISO-8601 UTC with milliseconds: the fixed width that makes text order time order.
    expect(row?.created).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/);
    const record = await store.find(keyOf(request));
    expect(record?.createdAt.getUTCFullYear()).not.toBe(2000);
    expect((record?.expiresAt.getTime() ?? 0) - (record?.createdAt.getTime() ?? 0)).toBe(7_200_000);
  });

  it('30 concurrent claims of the same key: exactly one wins', async () => {
    const base = claimRequest();
    const results = await Promise.all(
      Array.from({ length: 30 }, () => store.claim({ ...base, owner: randomUUID() })),
    );
    expect(results.filter((result) => result.claimed)).toEqual([{ claimed: true, takeover: false }]);
    const owners = new Set(results.map((result) => (result.claimed ? null : result.record.leaseOwner)));
    owners.delete(null);
    expect(owners.size).toBe(1);
    expect(await rowCount(base)).toBe(1);
  });

  it('a claim never runs inside another request’s open transaction (control: a bare query does, and is rolled back with it)', async () => {
    const holding = deferred();
    const opened = deferred();
    const request = claimRequest();
    const open = db
      .$transaction(async (tx) => {
        await tx.$executeRawUnsafe('select 1');
        opened.resolve();
        await holding.promise;
        throw new Error('roll back');
      })
      .catch(() => 'rolled back');
    await opened.promise;
    // Control: the adapter's one connection is inside the transaction, so a bare statement joins it.
    const bare = claimRequest();
    const bareInsert = db.$executeRawUnsafe(
      `insert into idempotency_keys (scope, procedure, key, fingerprint, state, created_at, expires_at)
       values (?, ?, ?, ?, 'completed', ${NOW}, ${nowPlus(60)})`,
      bare.scope,
      bare.procedure,
      bare.key,
      bare.fingerprint,
    );
    const claim = store.claim(request);
    await bareInsert;
    holding.resolve();
    expect(await open).toBe('rolled back');
    expect(await rowCount(bare)).toBe(0);
    // The store's claim waited for the connection instead, and its row is there.
    expect(await claim).toEqual({ claimed: true, takeover: false });
    expect(await rowCount(request)).toBe(1);
  });
});

describe('complete and release (fenced by the lease owner)', () => {
  it('complete with the right owner stores the response; another owner is fenced', async () => {
    const request = claimRequest();
    await store.claim(request);
    expect(await store.complete(keyOf(request), randomUUID(), output)).toBe(false);
    expect((await store.find(keyOf(request)))?.state).toBe('processing');
    expect(await store.complete(keyOf(request), request.owner, output)).toBe(true);
    expect(await store.find(keyOf(request))).toMatchObject({
      state: 'completed',
      response: output,
      leaseOwner: null,
      leaseActive: false,
    });
    const other: StoredResponse = { kind: 'error', httpStatus: 402, code: 'PAYMENT_REQUIRED', message: 'x' };
    expect(await store.complete(keyOf(request), request.owner, other)).toBe(false);
    expect((await store.find(keyOf(request)))?.response).toEqual(output);
  });

  it('stores an error response with its cause', async () => {
    const request = claimRequest();
    await store.claim(request);
    const error: StoredResponse = {
      kind: 'error',
      httpStatus: 402,
      code: 'PAYMENT_REQUIRED',
      message: 'Card declined',
      cause: { reason: 'insufficient_funds', retryable: false, attempts: 1, note: null },
    };
    expect(await store.complete(keyOf(request), request.owner, error)).toBe(true);
    expect((await store.find(keyOf(request)))?.response).toEqual(error);
  });

  it('release with the right owner deletes the claim; another owner, or a completed key, is kept', async () => {
    const request = claimRequest();
    await store.claim(request);
    expect(await store.release(keyOf(request), randomUUID())).toBe(false);
    expect(await rowCount(request)).toBe(1);
    expect(await store.release(keyOf(request), request.owner)).toBe(true);
    expect(await rowCount(request)).toBe(0);
    expect(await store.claim({ ...request, owner: randomUUID() })).toEqual({
      claimed: true,
      takeover: false,
    });

    const completed = claimRequest();
    await store.claim(completed);
    await store.complete(keyOf(completed), completed.owner, output);
    expect(await store.release(keyOf(completed), completed.owner)).toBe(false);
    expect(await rowCount(completed)).toBe(1);
  });

  it('countReplay counts replays', async () => {
    const request = claimRequest();
    await store.claim(request);
    await store.complete(keyOf(request), request.owner, output);
    await store.countReplay(keyOf(request));
    await store.countReplay(keyOf(request));
    expect((await store.find(keyOf(request)))?.replayCount).toBe(2);
  });

  it('renewLease extends only the owner’s live lease', async () => {
    const request = claimRequest({ leaseSeconds: 5 });
    await store.claim(request);
    expect(await store.renewLease?.(keyOf(request), randomUUID(), 600)).toBe(false);
    expect(await store.renewLease?.(keyOf(request), request.owner, 600)).toBe(true);
    const [row] = await db.$queryRawUnsafe<Array<{ left: number }>>(
      `select (julianday(locked_until) - julianday('now')) * 86400 as left from idempotency_keys
       where scope = ? and procedure = ? and key = ?`,
      request.scope,
      request.procedure,
      request.key,
    );
    expect(row?.left).toBeGreaterThan(500);
    await store.complete(keyOf(request), request.owner, output);
    expect(await store.renewLease?.(keyOf(request), request.owner, 600)).toBe(false);
  });
});

describe('takeover', () => {
  it('after the lease ends, the same request takes over; the old owner is fenced (zombie)', async () => {
    const zombie = claimRequest();
    await store.claim(zombie);
    const retry = { ...zombie, owner: randomUUID() };
    expect((await store.claim(retry)).claimed).toBe(false); // control: the lease is live
    await updateRow(zombie, `locked_until = ${nowPlus(-1)}`);
    expect((await store.find(keyOf(zombie)))?.leaseActive).toBe(false);
    expect(await store.claim(retry)).toEqual({ claimed: true, takeover: true });
    expect(await store.find(keyOf(zombie))).toMatchObject({ leaseOwner: retry.owner, leaseActive: true });
    expect(await store.complete(keyOf(zombie), zombie.owner, output)).toBe(false);
    expect(await store.release(keyOf(zombie), zombie.owner)).toBe(false);
    const retryOutput: StoredResponse = { ...output, body: '{"json":"retry"}' };
    expect(await store.complete(keyOf(retry), retry.owner, retryOutput)).toBe(true);
    expect((await store.find(keyOf(zombie)))?.response).toEqual(retryOutput);
  });

  it('a different request (fingerprint) cannot take over an expired lease', async () => {
    const first = claimRequest();
    await store.claim(first);
    await updateRow(first, `locked_until = ${nowPlus(-1)}`);
    const result = await store.claim({ ...first, owner: randomUUID(), fingerprint: fingerprintB });
    expect(result.claimed).toBe(false);
    if (!result.claimed)
      expect(result.record).toMatchObject({ fingerprint: fingerprintA, leaseActive: false });
    expect(await store.complete(keyOf(first), first.owner, output)).toBe(true);
  });

  it('a completed key is never taken over before it expires, even past its lease', async () => {
    const first = claimRequest({ leaseSeconds: 1 });
    await store.claim(first);
    await store.complete(keyOf(first), first.owner, output);
    await updateRow(first, `created_at = ${nowPlus(-3_600)}`);
    expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);
  });

  it('an expired record is claimed as new, even with another fingerprint (replay count reset)', async () => {
    const first = claimRequest();
    await store.claim(first);
    await store.complete(keyOf(first), first.owner, output);
    await store.countReplay(keyOf(first));
    const next = { ...first, owner: randomUUID(), fingerprint: fingerprintB, retentionSeconds: 60 };
    expect((await store.claim(next)).claimed).toBe(false); // control: not expired yet
    await updateRow(first, `expires_at = ${nowPlus(-1)}`);
    expect(await store.claim(next)).toEqual({ claimed: true, takeover: true });
    expect(await store.find(keyOf(first))).toMatchObject({
      fingerprint: fingerprintB,
      state: 'processing',
      response: null,
      leaseOwner: next.owner,
      replayCount: 0,
    });
  });

  it('an expired key whose lease is still live is not taken over', async () => {
    const first = claimRequest();
    await store.claim(first);
    await updateRow(first, `expires_at = ${nowPlus(-1)}`);
    expect((await store.claim({ ...first, owner: randomUUID(), fingerprint: fingerprintB })).claimed).toBe(
      false,
    );
  });
});

describe('per-principal in-flight cap', () => {
  it('refuses a new key at the cap with 429; a duplicate, another principal and a freed slot pass', async () => {
    const scope = uniqueScope();
    const cap = { max: 2, retryAfterSeconds: 3 };
    const first = claimRequest({ scope, inFlightCap: cap });
    await store.claim(first);
    await store.claim(claimRequest({ scope, inFlightCap: cap }));
    const third = claimRequest({ scope, inFlightCap: cap });
    await expect(store.claim(third)).rejects.toMatchObject({
      httpStatus: 429,
      code: 'idempotency_too_many_in_flight',
    });
    expect(await store.find(keyOf(third))).toBeNull();
    // A duplicate of a live key is answered, not counted.
    expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);
    expect((await store.claim(claimRequest({ inFlightCap: cap }))).claimed).toBe(true);
    // Control: without the cap the same claim passes.
    await store.complete(keyOf(first), first.owner, output);
    expect(await store.claim(third)).toEqual({ claimed: true, takeover: false });
  });

  it('12 concurrent new keys of one principal under a cap of 3: exactly 3 claimed (one writer: the count is exact)', async () => {
    const scope = uniqueScope();
    const cap = { max: 3, retryAfterSeconds: 1 };
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, () => store.claim(claimRequest({ scope, inFlightCap: cap }))),
    );
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(3);
    expect(results.filter((result) => result.status === 'rejected')).toHaveLength(9);
    // Control: the same burst of one principal without the cap claims every key.
    const uncappedScope = uniqueScope();
    const uncapped = await Promise.all(
      Array.from({ length: 12 }, () => store.claim(claimRequest({ scope: uncappedScope }))),
    );
    expect(uncapped.filter((result) => result.claimed)).toHaveLength(12);
  });
});

describe('transactions', () => {
  it('a rolled-back claim leaves the key free', async () => {
    const rolledBack = claimRequest();
    await expect(
      store.transaction(
        async (tx) => {
          await store.claim(rolledBack, tx);
          throw new Error('boom');
        },
        { lockTimeoutMs: 1_000, timeoutMs: 5_000 },
      ),
    ).rejects.toThrow('boom');
    expect(await store.find(keyOf(rolledBack))).toBeNull();
  });

  it('a duplicate waits for the first transaction and gets the committed record', async () => {
    const request = claimRequest();
    const claimed = deferred();
    const holding = deferred();
    const first = store.transaction(
      async (tx) => {
        await store.claim(request, tx);
        claimed.resolve();
        await holding.promise;
        await store.complete(request, request.owner, output, tx);
      },
      { lockTimeoutMs: 5_000, timeoutMs: 10_000 },
    );
    await claimed.promise;
    const duplicate = store.transaction((tx) => store.claim({ ...request, owner: randomUUID() }, tx), {
      lockTimeoutMs: 5_000,
      timeoutMs: 10_000,
    });
    setTimeout(holding.resolve, 100);
    await first;
    expect(await duplicate).toMatchObject({
      claimed: false,
      record: { state: 'completed', response: output },
    });
  });

  it('a duplicate that cannot wait long enough gets a lock timeout (→ 409), not a 500', async () => {
    const request = claimRequest();
    const claimed = deferred();
    const holding = deferred();
    const first = store.transaction(
      async (tx) => {
        await store.claim(request, tx);
        claimed.resolve();
        await holding.promise;
      },
      { lockTimeoutMs: 5_000, timeoutMs: 10_000 },
    );
    await claimed.promise;
    const error = await store
      .transaction((tx) => store.claim({ ...request, owner: randomUUID() }, tx), {
        lockTimeoutMs: 100,
        timeoutMs: 5_000,
      })
      .then(
        () => null,
        (caught: unknown) => caught,
      );
    holding.resolve();
    await first;
    expect(error).not.toBeNull();
    expect(store.isLockTimeout(error)).toBe(true);
    // Control: other errors are not lock timeouts.
    expect(store.isLockTimeout(new Error('SQLITE_CORRUPT: database disk image is malformed'))).toBe(false);
    expect(store.isLockTimeout(null)).toBe(false);
  });
});

describe('claim with a response (a stored error recorded after its rollback)', () => {
  const declined: StoredResponse = {
    kind: 'error',
    httpStatus: 402,
    code: 'PAYMENT_REQUIRED',
    message: 'Declined',
  };

  it('inserts the key already completed, without a lease', async () => {
    const request = claimRequest({ response: declined });
    expect(await store.claim(request)).toEqual({ claimed: true, takeover: false });
    expect(await store.find(keyOf(request))).toMatchObject({
      state: 'completed',
      response: declined,
      leaseOwner: null,
      leaseActive: false,
    });
  });

  it('never overwrites a live key: returns it instead', async () => {
    const first = claimRequest();
    await store.claim(first);
    await store.complete(keyOf(first), first.owner, output);
    const late = await store.claim({ ...first, owner: randomUUID(), response: declined });
    expect(late).toMatchObject({ claimed: false, record: { state: 'completed', response: output } });
  });
});

describe('setup errors', () => {
  it('a missing table is reported by name; a bad table name is refused', async () => {
    const missing = createSqliteIdempotencyStore(db, { table: 'no_such_keys' });
    await expect(missing.claim(claimRequest())).rejects.toBeInstanceOf(SqliteIdempotencyTableMissingError);
    await expect(missing.deleteExpiredBatch(10)).rejects.toThrow(/no_such_keys does not exist/);
    expect(() => createSqliteIdempotencyStore(db, { table: 'keys; drop table x' })).toThrow(/Invalid table/);
  });
});

describe('cleanup', () => {
  async function withPrivateTable(fn: (table: string) => Promise<void>) {
    const table = `keys_${randomUUID().replaceAll('-', '')}`;
    const { sqliteIdempotencyKeysSchema } = await import('../src/sqlite/index.ts');
    for (const statement of sqliteIdempotencyKeysSchema(table).statements)
      await db.$executeRawUnsafe(statement);
    try {
      await fn(table);
    } finally {
      await db.$executeRawUnsafe(`drop table "${table}"`);
    }
  }

  function seed(table: string, kind: string, count: number) {
    const shapes: Record<string, string> = {
      expiredCompleted: `'completed', null, null, ${nowPlus(-172_800)}, ${nowPlus(-1)}`,
      expiredDeadLease: `'processing', 'o', ${nowPlus(-60)}, ${nowPlus(-172_800)}, ${nowPlus(-1)}`,
      expiredLiveLease: `'processing', 'o', ${nowPlus(60)}, ${nowPlus(-172_800)}, ${nowPlus(-1)}`,
      liveCompleted: `'completed', null, null, ${NOW}, ${nowPlus(86_400)}`,
      liveProcessing: `'processing', 'o', ${nowPlus(-60)}, ${NOW}, ${nowPlus(86_400)}`,
    };
    return db.$executeRawUnsafe(
      `with recursive n(i) as (select 1 union all select i + 1 from n where i < ${count})
       insert into "${table}" (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at)
       select 'cleanup', '${kind}', cast(i as text), 'f', ${shapes[kind]} from n`,
    );
  }

  async function countsByKind(table: string): Promise<Record<string, number>> {
    const rows = await db.$queryRawUnsafe<Array<{ procedure: string; n: bigint | number }>>(
      `select procedure, count(*) as n from "${table}" group by procedure`,
    );
    return Object.fromEntries(rows.map((row) => [row.procedure, Number(row.n)]));
  }

  it('deletes exactly the expired rows without a live lease, in batches', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createSqliteIdempotencyStore(db, { table });
      await seed(table, 'expiredCompleted', 15);
      await seed(table, 'expiredDeadLease', 5);
      await seed(table, 'expiredLiveLease', 4);
      await seed(table, 'liveCompleted', 6);
      await seed(table, 'liveProcessing', 3);
      expect(await privateStore.deleteExpiredBatch(7)).toBe(7);
      expect(await cleanupExpiredKeys(privateStore, { batchSize: 6 })).toEqual({ deleted: 13, batches: 3 });
      expect(await countsByKind(table)).toEqual({ expiredLiveLease: 4, liveCompleted: 6, liveProcessing: 3 });
      expect(await cleanupExpiredKeys(privateStore, { batchSize: 6 })).toEqual({ deleted: 0, batches: 1 });
    });
  });

  it('three concurrent cleanups delete every expired row once, and claims of expired keys still win', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createSqliteIdempotencyStore(db, { table });
      await seed(table, 'expiredCompleted', 1_500);
      await seed(table, 'expiredLiveLease', 50);
      const claims = Array.from({ length: 20 }, (_, i) =>
        privateStore.claim({
          scope: 'cleanup',
          procedure: 'expiredCompleted',
          key: String(i * 10 + 1),
          fingerprint: fingerprintA,
          owner: randomUUID(),
          leaseSeconds: 30,
          retentionSeconds: 60,
        }),
      );
      const [a, b, c, ...claimed] = await Promise.all([
        cleanupExpiredKeys(privateStore, { batchSize: 100 }),
        cleanupExpiredKeys(privateStore, { batchSize: 100 }),
        cleanupExpiredKeys(privateStore, { batchSize: 100 }),
        ...claims,
      ]);
      expect(claimed.every((result) => result.claimed)).toBe(true);
      // A key cleaned up before its claim is deleted and then inserted anew; one claimed first is kept.
      const deleted = (a?.deleted ?? 0) + (b?.deleted ?? 0) + (c?.deleted ?? 0);
      expect(deleted).toBeGreaterThanOrEqual(1_480);
      expect(deleted).toBeLessThanOrEqual(1_500);
      expect(await countsByKind(table)).toEqual({ expiredCompleted: 20, expiredLiveLease: 50 });
    });
  });
});
