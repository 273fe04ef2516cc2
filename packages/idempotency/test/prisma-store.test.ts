import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ClaimRequest, fingerprintRequest, type RecordKey, type StoredResponse } from '../src/index.ts';
import { cleanupExpiredKeys, createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, deferred, uniqueScope, uniqueTableName } from './support/db.ts';

let db: Database;
let store: ReturnType<typeof createPrismaIdempotencyStore<Database>>;

beforeAll(async () => {
  db = await connectWithOwnTable();
  store = createPrismaIdempotencyStore(db);
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

/** Runs SQL on the row of `key` in `table` (default: the real table). */
function updateRow(key: RecordKey, set: string, table = 'idempotency_keys') {
  return db.$executeRawUnsafe(
    `update "${table}" set ${set} where scope = $1 and procedure = $2 and key = $3`,
    key.scope,
    key.procedure,
    key.key,
  );
}

async function rowCount(key: RecordKey): Promise<number> {
  const rows = await db.$queryRawUnsafe<Array<{ n: number }>>(
    'select count(*)::int as n from idempotency_keys where scope = $1 and procedure = $2 and key = $3',
    key.scope,
    key.procedure,
    key.key,
  );
  return rows[0]?.n ?? -1;
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
      if (result.claimed) continue;
      expect(result.record).toMatchObject({
        fingerprint: fingerprintA,
        state: 'processing',
        leaseOwner: first.owner,
        leaseActive: true,
      });
    }
    expect(await rowCount(first)).toBe(1);
  });

  it('keys are scoped by (scope, procedure, key)', async () => {
    const first = claimRequest();
    await store.claim(first);
    expect(await store.claim({ ...first, owner: randomUUID(), scope: uniqueScope() })).toEqual({
      claimed: true,
      takeover: false,
    });
    expect(await store.claim({ ...first, owner: randomUUID(), procedure: 'orders.other' })).toEqual({
      claimed: true,
      takeover: false,
    });
    expect(await store.claim({ ...first, owner: randomUUID(), key: randomUUID() })).toEqual({
      claimed: true,
      takeover: false,
    });
    expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);
  });

  it('takes all times from the database clock, not the app clock', async () => {
    const request = claimRequest({ leaseSeconds: 45, retentionSeconds: 7_200 });
    // The app's clock is 25 years off; the database's is not.
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2000-01-01T00:00:00Z') });
    try {
      await store.claim(request);
    } finally {
      vi.useRealTimers();
    }
    const [row] = await db.$queryRawUnsafe<
      Array<{ retention: number; lease: number; age: number; created_at: Date }>
    >(
      `select extract(epoch from expires_at - created_at)::float8 as retention,
              extract(epoch from locked_until - created_at)::float8 as lease,
              extract(epoch from now() - created_at)::float8 as age, created_at
       from idempotency_keys where scope = $1 and procedure = $2 and key = $3`,
      request.scope,
      request.procedure,
      request.key,
    );
    expect(row?.retention).toBe(7_200);
    expect(row?.lease).toBe(45);
    expect(row?.age).toBeGreaterThanOrEqual(0);
    expect(row?.age).toBeLessThan(60);
    expect(row?.created_at.getUTCFullYear()).not.toBe(2000);
    const record = await store.find(keyOf(request));
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
    expect(owners.size).toBe(1); // every loser saw the same winner
    expect(await rowCount(base)).toBe(1);
  });
});

describe('complete and release (fenced by the lease owner)', () => {
  it('complete with the right owner stores the response; another owner is fenced', async () => {
    const request = claimRequest();
    await store.claim(request);
    expect(await store.complete(keyOf(request), randomUUID(), output)).toBe(false);
    expect((await store.find(keyOf(request)))?.state).toBe('processing');

    expect(await store.complete(keyOf(request), request.owner, output)).toBe(true);
    const record = await store.find(keyOf(request));
    expect(record).toMatchObject({
      state: 'completed',
      response: output,
      leaseOwner: null,
      leaseActive: false,
    });
    const [row] = await db.$queryRawUnsafe<Array<{ http_status: number; locked_until: Date | null }>>(
      'select http_status, locked_until from idempotency_keys where scope = $1 and procedure = $2 and key = $3',
      request.scope,
      request.procedure,
      request.key,
    );
    expect(row).toEqual({ http_status: 200, locked_until: null });

    // Completed once: a second completion (even by the former owner) changes nothing.
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
    // Released: the key is free for a retry.
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
});

describe('takeover', () => {
  it('after the lease ends, the same request takes over; the old owner is fenced (zombie)', async () => {
    const zombie = claimRequest();
    await store.claim(zombie);
    const retry = { ...zombie, owner: randomUUID() };
    // Control: while the lease is live, the retry does not take over.
    expect((await store.claim(retry)).claimed).toBe(false);

    await updateRow(zombie, `locked_until = now() - interval '1 second'`);
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
    await updateRow(first, `locked_until = now() - interval '1 second'`);
    const result = await store.claim({ ...first, owner: randomUUID(), fingerprint: fingerprintB });
    expect(result.claimed).toBe(false);
    if (!result.claimed)
      expect(result.record).toMatchObject({
        fingerprint: fingerprintA,
        leaseOwner: first.owner,
        leaseActive: false,
      });
    // The original owner can still finish: nobody took over.
    expect(await store.complete(keyOf(first), first.owner, output)).toBe(true);
  });

  it('a completed key is never taken over before it expires, even past its lease', async () => {
    const first = claimRequest({ leaseSeconds: 1 });
    await store.claim(first);
    await store.complete(keyOf(first), first.owner, output);
    await updateRow(first, `created_at = now() - interval '1 hour'`);
    expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);
  });

  it('an expired record is claimed as new, even with another fingerprint', async () => {
    const first = claimRequest();
    await store.claim(first);
    await store.complete(keyOf(first), first.owner, output);
    await store.countReplay(keyOf(first));
    const next = { ...first, owner: randomUUID(), fingerprint: fingerprintB, retentionSeconds: 60 };
    // Control: not expired yet → the stored record.
    expect((await store.claim(next)).claimed).toBe(false);

    await updateRow(first, `expires_at = now() - interval '1 second'`);
    expect(await store.claim(next)).toEqual({ claimed: true, takeover: true });
    expect(await store.find(keyOf(first))).toMatchObject({
      fingerprint: fingerprintB,
      state: 'processing',
      response: null,
      leaseOwner: next.owner,
      replayCount: 0,
    });
    const [row] = await db.$queryRawUnsafe<Array<{ retention: number; http_status: number | null }>>(
      `select extract(epoch from expires_at - created_at)::float8 as retention, http_status
       from idempotency_keys where scope = $1 and procedure = $2 and key = $3`,
      first.scope,
      first.procedure,
      first.key,
    );
    expect(row).toEqual({ retention: 60, http_status: null });
  });

  it('an expired record whose lease is still live is not taken over (the request is still running)', async () => {
    const running = claimRequest();
    await store.claim(running);
    await updateRow(running, `expires_at = now() - interval '1 second'`);
    const result = await store.claim({ ...running, owner: randomUUID(), fingerprint: fingerprintB });
    expect(result.claimed).toBe(false);
    expect(await store.complete(keyOf(running), running.owner, output)).toBe(true);
  });
});

describe('transaction', () => {
  it('an uncommitted claim blocks a duplicate until lock_timeout; isLockTimeout recognises it', async () => {
    const request = claimRequest();
    const holding = deferred();
    const claimed = deferred();
    const first = store.transaction(
      async (tx) => {
        const result = await store.claim(request, tx);
        claimed.resolve();
        await holding.promise;
        await store.complete(request, request.owner, output, tx);
        return result;
      },
      { lockTimeoutMs: 5_000, timeoutMs: 10_000 },
    );
    await claimed.promise;
    // Uncommitted: invisible outside.
    expect(await store.find(keyOf(request))).toBeNull();

    const duplicate = { ...request, owner: randomUUID() };
    const started = Date.now();
    const error = await store
      .transaction((tx) => store.claim(duplicate, tx), { lockTimeoutMs: 200, timeoutMs: 5_000 })
      .then(
        () => null,
        (caught: unknown) => caught,
      );
    expect(error).not.toBeNull();
    expect(store.isLockTimeout(error)).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(store.isLockTimeout(new Error('connection refused'))).toBe(false);
    expect(store.isLockTimeout(null)).toBe(false);

    holding.resolve();
    expect(await first).toEqual({ claimed: true, takeover: false });
    // Committed: a duplicate now reads the completed record at once.
    const replay = await store.transaction((tx) => store.claim(duplicate, tx), {
      lockTimeoutMs: 200,
      timeoutMs: 5_000,
    });
    expect(replay).toMatchObject({ claimed: false, record: { state: 'completed', response: output } });
  });

  it('a duplicate waiting on the lock gets the record once the first commits', async () => {
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

  it("the claim sets the transaction's lock_timeout itself, for that transaction only", async () => {
    const request = claimRequest();
    const [inside] = await store.transaction(
      async (tx) => {
        await store.claim(request, tx);
        return tx.$queryRawUnsafe<Array<{ lock_timeout: string }>>(
          `select current_setting('lock_timeout') as lock_timeout`,
        );
      },
      { lockTimeoutMs: 1_234, timeoutMs: 5_000 },
    );
    expect(inside?.lock_timeout).toBe('1234ms');
    const [after] = await db.$queryRawUnsafe<Array<{ lock_timeout: string }>>(
      `select current_setting('lock_timeout') as lock_timeout`,
    );
    expect(after?.lock_timeout).toBe('0');
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

describe('replay read', () => {
  it('takes no row lock: a duplicate of a completed key answers while another transaction locks the row (control: ON CONFLICT DO UPDATE … WHERE false waits)', async () => {
    const request = claimRequest();
    await store.claim(request);
    await store.complete(keyOf(request), request.owner, output);
    const locked = deferred();
    const release = deferred();
    const holder = db.$transaction(
      async (tx) => {
        await tx.$queryRawUnsafe(
          'select 1 from idempotency_keys where scope = $1 and procedure = $2 and key = $3 for update',
          request.scope,
          request.procedure,
          request.key,
        );
        locked.resolve();
        await release.promise;
      },
      { timeout: 10_000 },
    );
    await locked.promise;
    try {
      const duplicate = await store.transaction(
        (tx) => store.claim({ ...request, owner: randomUUID() }, tx),
        {
          lockTimeoutMs: 300,
          timeoutMs: 5_000,
        },
      );
      expect(duplicate).toMatchObject({ claimed: false, record: { state: 'completed', response: output } });

      // Control: the claim as it was written before (the conflict arm locks the row even when its WHERE is
      // false) waits for the holder and gives up at the lock timeout.
      const control = await db
        .$transaction(async (tx) => {
          await tx.$executeRawUnsafe('set local lock_timeout = 300');
          return tx.$queryRawUnsafe(
            `insert into idempotency_keys as k (scope, procedure, key, fingerprint, state, created_at, expires_at)
             values ($1, $2, $3, $4, 'processing', now(), now() + interval '1 hour')
             on conflict (scope, procedure, key) do update set state = excluded.state where false
             returning 1`,
            request.scope,
            request.procedure,
            request.key,
            request.fingerprint,
          );
        })
        .then(
          () => null,
          (error: unknown) => error,
        );
      expect(store.isLockTimeout(control)).toBe(true);
    } finally {
      release.resolve();
      await holder;
    }
  });
});

describe('cleanup', () => {
  // Cleanup deletes every expired row of its table; other test files share the real table, so these tests
  // run on a private copy of it (which also covers the `table` option).
  async function withPrivateTable(fn: (table: string) => Promise<void>) {
    const table = uniqueTableName('idem_keys');
    await db.$executeRawUnsafe(`create table "${table}" (like idempotency_keys including all)`);
    try {
      await fn(table);
    } finally {
      await db.$executeRawUnsafe(`drop table "${table}"`);
    }
  }

  /** Inserts `count` rows in one of the shapes cleanup must tell apart. */
  function seed(table: string, kind: string, count: number) {
    const shapes: Record<string, string> = {
      // completed, past retention → deleted
      expiredCompleted: `'completed', null, null, now() - interval '2 days', now() - interval '1 second'`,
      // processing, past retention, lease ended (owner died) → deleted
      expiredDeadLease: `'processing', gen_random_uuid(), now() - interval '1 minute', now() - interval '2 days', now() - interval '1 second'`,
      // processing, past retention, lease live → kept
      expiredLiveLease: `'processing', gen_random_uuid(), now() + interval '1 minute', now() - interval '2 days', now() - interval '1 second'`,
      // within retention → kept
      liveCompleted: `'completed', null, null, now(), now() + interval '1 day'`,
      liveProcessing: `'processing', gen_random_uuid(), now() - interval '1 minute', now(), now() + interval '1 day'`,
    };
    return db.$executeRawUnsafe(
      `insert into "${table}" (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at)
       select 'cleanup', '${kind}', i::text, repeat('0', 64), ${shapes[kind]} from generate_series(1, ${count}) i`,
    );
  }

  async function countsByKind(table: string): Promise<Record<string, number>> {
    const rows = await db.$queryRawUnsafe<Array<{ procedure: string; n: number }>>(
      `select procedure, count(*)::int as n from "${table}" group by procedure`,
    );
    return Object.fromEntries(rows.map((row) => [row.procedure, row.n]));
  }

  it('rejects a batch size that is not a positive integer (0 used to loop forever)', async () => {
    let calls = 0;
    const counting = {
      deleteExpiredBatch: async () => {
        calls += 1;
        if (calls > 5) throw new Error('still looping');
        return 0;
      },
    };
    for (const batchSize of [0, -1, 1.5, Number.NaN])
      await expect(cleanupExpiredKeys(counting, { batchSize })).rejects.toThrow(RangeError);
    expect(calls).toBe(0);
    // Control: a valid size runs one (empty) batch.
    expect(await cleanupExpiredKeys(counting, { batchSize: 10 })).toEqual({ deleted: 0, batches: 1 });
    expect(calls).toBe(1);
  });

  it('refuses a partitioned key table (a ctid is unique only per partition); control: the ctid delete hits a live key', async () => {
    const table = uniqueTableName('parted_keys');
    const probe = `${table}_probe`;
    const createParted = async (name: string) => {
      await db.$executeRawUnsafe(
        `create table "${name}" (like idempotency_keys including defaults, primary key (scope, procedure, key))
         partition by hash (scope)`,
      );
      for (const remainder of [0, 1])
        await db.$executeRawUnsafe(
          `create table "${name}_${remainder}" partition of "${name}" for values with (modulus 2, remainder ${remainder})`,
        );
    };
    try {
      await createParted(table);
      await createParted(probe);
      // Two scopes that hash to different partitions (found on a probe table, so the real one gets exactly one
      // row per partition, each at ctid (0,1)).
      await db.$executeRawUnsafe(
        `insert into "${probe}" (scope, procedure, key, fingerprint, state, created_at, expires_at)
         select 'partition-' || i, 'p', 'k', 'f', 'completed', now(), now() from generate_series(1, 20) i`,
      );
      const [expired, live] = (
        await db.$queryRawUnsafe<Array<{ scope: string }>>(
          `select distinct on (tableoid) scope from "${probe}" order by tableoid, scope`,
        )
      ).map((row) => row.scope);
      await db.$executeRawUnsafe(
        `insert into "${table}" (scope, procedure, key, fingerprint, state, created_at, expires_at)
         values ($1, 'p', 'k', 'f', 'completed', now(), now() - interval '1 second'),
                ($2, 'p', 'k', 'f', 'completed', now(), now() + interval '1 day')`,
        expired,
        live,
      );
      const count = async () =>
        (await db.$queryRawUnsafe<Array<{ n: number }>>(`select count(*)::int as n from "${table}"`))[0]?.n;

      const parted = createPrismaIdempotencyStore(db, { table });
      await expect(parted.deleteExpiredBatch(100)).rejects.toThrow(/partitioned/);
      expect(await count()).toBe(2);

      // Control: the ctid-named batch delete on this table also deletes the LIVE key sharing the slot (0,1).
      await db.$executeRawUnsafe(
        `delete from "${table}" where ctid in (select ctid from "${table}" where expires_at <= now() limit 100)`,
      );
      expect(await count()).toBe(0);
    } finally {
      await db.$executeRawUnsafe(`drop table if exists "${table}", "${probe}"`);
    }
  });

  it('rejects a table name that is not an identifier', () => {
    expect(() => createPrismaIdempotencyStore(db, { table: 'keys; drop table x' })).toThrow(/Invalid table/);
    expect(() => createPrismaIdempotencyStore(db, { table: 'public.idempotency_keys' })).not.toThrow();
  });

  it('deletes exactly the expired rows without a live lease, in batches', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createPrismaIdempotencyStore(db, { table });
      await seed(table, 'expiredCompleted', 15);
      await seed(table, 'expiredDeadLease', 5);
      await seed(table, 'expiredLiveLease', 4);
      await seed(table, 'liveCompleted', 6);
      await seed(table, 'liveProcessing', 3);

      expect(await privateStore.deleteExpiredBatch(7)).toBe(7);
      expect(await cleanupExpiredKeys(privateStore, { batchSize: 6 })).toEqual({ deleted: 13, batches: 3 });
      expect(await countsByKind(table)).toEqual({ expiredLiveLease: 4, liveCompleted: 6, liveProcessing: 3 });
      // Nothing left to delete: one empty batch.
      expect(await cleanupExpiredKeys(privateStore, { batchSize: 6 })).toEqual({ deleted: 0, batches: 1 });
      // The real table's store never touched the private table's rows and vice versa.
      expect(
        await privateStore.find({ scope: 'cleanup', procedure: 'liveCompleted', key: '1' }),
      ).toMatchObject({
        state: 'completed',
      });
    });
  });

  it('an exact multiple of the batch size ends with one empty batch; maxBatches bounds the work', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createPrismaIdempotencyStore(db, { table });
      await seed(table, 'expiredCompleted', 20);
      expect(await cleanupExpiredKeys(privateStore, { batchSize: 5, maxBatches: 2 })).toEqual({
        deleted: 10,
        batches: 2,
      });
      expect(await cleanupExpiredKeys(privateStore, { batchSize: 5 })).toEqual({ deleted: 10, batches: 3 });
      expect(await countsByKind(table)).toEqual({});
    });
  });

  it('two concurrent cleanups split the work: together they delete every expired row once', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createPrismaIdempotencyStore(db, { table });
      await seed(table, 'expiredCompleted', 1_500);
      await seed(table, 'expiredDeadLease', 500);
      await seed(table, 'expiredLiveLease', 50);
      await seed(table, 'liveCompleted', 50);
      const results = await Promise.all([
        cleanupExpiredKeys(privateStore, { batchSize: 100 }),
        cleanupExpiredKeys(privateStore, { batchSize: 100 }),
        cleanupExpiredKeys(privateStore, { batchSize: 100 }),
      ]);
      expect(results.reduce((sum, result) => sum + result.deleted, 0)).toBe(2_000);
      expect(await countsByKind(table)).toEqual({ expiredLiveLease: 50, liveCompleted: 50 });
    });
  });

  it('cleanup and a claim of the same expired key do not conflict', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createPrismaIdempotencyStore(db, { table });
      await seed(table, 'expiredCompleted', 200);
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
      const [cleanup, ...claimed] = await Promise.all([
        cleanupExpiredKeys(privateStore, { batchSize: 50 }),
        ...claims,
      ]);
      // Every claim owns its key, whether it took over the expired row or inserted after cleanup deleted it.
      expect(claimed.every((result) => result.claimed)).toBe(true);
      expect(cleanup.deleted).toBeGreaterThanOrEqual(180);
      expect(cleanup.deleted).toBeLessThanOrEqual(200);
      expect(await countsByKind(table)).toEqual({ expiredCompleted: 20 });
    });
  });
});
