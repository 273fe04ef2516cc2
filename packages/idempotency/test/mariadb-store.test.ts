/**
 * The MariaDB store's contract, on the real MariaDB (a scratch database of this file's own): the same claim,
 * complete, release, fencing, takeover, lease, cap, transaction and cleanup rules as prisma-store.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import { handleTransactional } from '../src/core/handler.ts';
import {
  type ClaimRequest,
  fingerprintRequest,
  IdempotencyError,
  type RecordKey,
  type StoredResponse,
} from '../src/index.ts';
import {
  cleanupExpiredKeys,
  createMariadbIdempotencyStore,
  MariadbIdempotencyTableMissingError,
  MariadbKeyColumnTooLongError,
  MariadbResponseTooLargeError,
  mariadbIdempotencyKeysSchema,
} from '../src/mariadb/index.ts';
import { deferred, uniqueScope, uniqueTableName, waitUntil } from './support/db.ts';
import { connectMariadbWithOwnTable, type MariadbWithOwnTable } from './support/mariadb.ts';

let mariadb: MariadbWithOwnTable;
let db: MariadbWithOwnTable['db'];
let store: ReturnType<typeof createMariadbIdempotencyStore<MariadbWithOwnTable['db']>>;

beforeAll(async () => {
  mariadb = await connectMariadbWithOwnTable();
  db = mariadb.db;
  store = createMariadbIdempotencyStore(db);
});
afterAll(async () => {
  await mariadb?.dispose();
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
const where = 'scope = ? AND `procedure` = ? AND `key` = ?';

function updateRow(key: RecordKey, set: string, table = 'idempotency_keys') {
  return db.$executeRawUnsafe(
    `UPDATE \`${table}\` SET ${set} WHERE ${where}`,
    key.scope,
    key.procedure,
    key.key,
  );
}

async function rowCount(key: RecordKey): Promise<number> {
  const rows = await db.$queryRawUnsafe<Array<{ n: bigint }>>(
    `SELECT COUNT(*) AS n FROM idempotency_keys WHERE ${where}`,
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

  it('keys compare byte for byte: case and trailing spaces make another key (control: a VARCHAR column in the default collation merges them)', async () => {
    const first = claimRequest({ key: 'Order-Key' });
    await store.claim(first);
    for (const key of ['order-key', 'ORDER-KEY', 'Order-Key '])
      expect(await store.claim({ ...first, owner: randomUUID(), key })).toEqual({
        claimed: true,
        takeover: false,
      });
    expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);

    // Control: the same primary key on VARCHAR in the server's default collation says these keys are one.
    const table = uniqueTableName('collation_keys');
    await db.$executeRawUnsafe(
      `CREATE TABLE \`${table}\` (k VARCHAR(255) NOT NULL PRIMARY KEY) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci`,
    );
    try {
      const inserted = [];
      for (const key of ['Order-Key', 'order-key', 'ORDER-KEY', 'Order-Key '])
        inserted.push(await db.$executeRawUnsafe(`INSERT IGNORE INTO \`${table}\` (k) VALUES (?)`, key));
      expect(inserted).toEqual([1, 0, 0, 0]);
    } finally {
      await db.$executeRawUnsafe(`DROP TABLE \`${table}\``);
    }
  });

  it('takes all times from the database clock (UTC), not the app clock', async () => {
    const request = claimRequest({ leaseSeconds: 45, retentionSeconds: 7_200 });
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2000-01-01T00:00:00Z') });
    try {
      await store.claim(request);
    } finally {
      vi.useRealTimers();
    }
    const [row] = await db.$queryRawUnsafe<Array<{ retention: bigint; lease: bigint; age: bigint }>>(
      `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, expires_at) AS retention,
              TIMESTAMPDIFF(MICROSECOND, created_at, locked_until) AS lease,
              TIMESTAMPDIFF(SECOND, created_at, UTC_TIMESTAMP(6)) AS age
       FROM idempotency_keys WHERE ${where}`,
      request.scope,
      request.procedure,
      request.key,
    );
    expect(Number(row?.retention)).toBe(7_200_000_000);
    expect(Number(row?.lease)).toBe(45_000_000);
    expect(Number(row?.age)).toBeGreaterThanOrEqual(0);
    expect(Number(row?.age)).toBeLessThan(60);
    const record = await store.find(keyOf(request));
    expect(record?.createdAt.getUTCFullYear()).not.toBe(2000);
    // Stored as UTC and read as UTC: the record's time is the real time.
    expect(Math.abs((record?.createdAt.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
    expect((record?.expiresAt.getTime() ?? 0) - (record?.createdAt.getTime() ?? 0)).toBe(7_200_000);
  });

  it('a session in another time zone sees the same lease (times are UTC_TIMESTAMP, not NOW)', async () => {
    const request = claimRequest({ leaseSeconds: 30 });
    await db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SET time_zone = '+10:00'`);
      await store.claim(request, tx);
      await tx.$executeRawUnsafe(`SET time_zone = @@global.time_zone`);
    });
    expect(await store.find(keyOf(request))).toMatchObject({ leaseActive: true });
    // Control: the lease measured against the session's NOW() in +10:00 would read as 10 hours in the past.
    const [row] = await db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SET time_zone = '+10:00'`);
      const rows = await tx.$queryRawUnsafe<Array<{ live: bigint }>>(
        `SELECT locked_until > NOW(6) AS live FROM idempotency_keys WHERE ${where}`,
        request.scope,
        request.procedure,
        request.key,
      );
      await tx.$executeRawUnsafe(`SET time_zone = @@global.time_zone`);
      return rows;
    });
    expect(Number(row?.live)).toBe(0);
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

  it('a scope or procedure longer than its column is refused with a typed error, and nothing is stored', async () => {
    const long = claimRequest({ scope: 'é'.repeat(257) }); // 514 bytes
    await expect(store.claim(long)).rejects.toBeInstanceOf(MariadbKeyColumnTooLongError);
    await expect(store.claim(claimRequest({ procedure: 'p'.repeat(256) }))).rejects.toThrow(
      /procedure is 256 bytes/,
    );
    expect(await rowCount({ ...long, scope: long.scope.slice(0, 256) })).toBe(0);
    // The limit itself fits.
    expect((await store.claim(claimRequest({ scope: 'é'.repeat(256) }))).claimed).toBe(true);
  });

  it('a missing table is reported by name, with how to create it', async () => {
    const missing = createMariadbIdempotencyStore(db, { table: uniqueTableName('absent') });
    const error = await missing.claim(claimRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(MariadbIdempotencyTableMissingError);
    expect((error as Error).message).toMatch(/mariadbIdempotencyKeysSchema/);
    // Control: another failure is not mistaken for it.
    expect(
      await store.claim(claimRequest({ fingerprint: 'x'.repeat(65) })).catch((caught: unknown) => caught),
    ).not.toBeInstanceOf(MariadbIdempotencyTableMissingError);
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
    const [row] = await db.$queryRawUnsafe<Array<{ http_status: number; locked_until: Date | null }>>(
      `SELECT http_status, locked_until FROM idempotency_keys WHERE ${where}`,
      request.scope,
      request.procedure,
      request.key,
    );
    expect(row).toEqual({ http_status: 200, locked_until: null });
    const other: StoredResponse = { kind: 'error', httpStatus: 402, code: 'PAYMENT_REQUIRED', message: 'x' };
    expect(await store.complete(keyOf(request), request.owner, other)).toBe(false);
    expect((await store.find(keyOf(request)))?.response).toEqual(output);
  });

  it('stores an error response with its cause, and a large body whole (MEDIUMTEXT)', async () => {
    const request = claimRequest();
    await store.claim(request);
    const error: StoredResponse = {
      kind: 'error',
      httpStatus: 402,
      code: 'PAYMENT_REQUIRED',
      message: 'Card declined — «é»',
      cause: { reason: 'insufficient_funds', retryable: false, attempts: 1, note: null },
    };
    expect(await store.complete(keyOf(request), request.owner, error)).toBe(true);
    expect((await store.find(keyOf(request)))?.response).toEqual(error);

    const big = claimRequest();
    await store.claim(big);
    const body: StoredResponse = {
      kind: 'output',
      httpStatus: 200,
      body: JSON.stringify({ json: 'x'.repeat(200_000) }),
    };
    expect(await store.complete(keyOf(big), big.owner, body)).toBe(true);
    expect((await store.find(keyOf(big)))?.response).toEqual(body);
  });

  it('a response larger than MEDIUMTEXT is refused with a typed error, and the key stays as it was', async () => {
    const request = claimRequest();
    await store.claim(request);
    const huge: StoredResponse = { kind: 'output', httpStatus: 200, body: 'x'.repeat(16_777_216) };
    await expect(store.complete(keyOf(request), request.owner, huge)).rejects.toBeInstanceOf(
      MariadbResponseTooLargeError,
    );
    expect(await store.find(keyOf(request))).toMatchObject({ state: 'processing', response: null });
    const declined: StoredResponse = {
      kind: 'error',
      httpStatus: 402,
      code: 'X',
      message: 'é'.repeat(8_388_608),
    };
    const refused = claimRequest({ response: declined });
    await expect(store.claim(refused)).rejects.toThrow(/at most 16777215/);
    expect(await store.find(keyOf(refused))).toBeNull();
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
});

describe('lease renewal', () => {
  it('extends only the owner’s live processing lease; a renewed lease is not taken over (control: without it, it is)', async () => {
    const request = claimRequest({ leaseSeconds: 30 });
    await store.claim(request);
    await updateRow(request, 'locked_until = TIMESTAMPADD(SECOND, 1, UTC_TIMESTAMP(6))');
    expect(await store.renewLease?.(keyOf(request), randomUUID(), 30)).toBe(false);
    expect(await store.renewLease?.(keyOf(request), request.owner, 30)).toBe(true);
    const [row] = await db.$queryRawUnsafe<Array<{ left: bigint }>>(
      `SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), locked_until) AS \`left\` FROM idempotency_keys WHERE ${where}`,
      request.scope,
      request.procedure,
      request.key,
    );
    expect(Number(row?.left)).toBeGreaterThan(20);
    expect((await store.claim({ ...request, owner: randomUUID() })).claimed).toBe(false);
    // Control: the same lease left to end is taken over by the retry.
    await updateRow(request, 'locked_until = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))');
    expect(await store.claim({ ...request, owner: randomUUID() })).toEqual({ claimed: true, takeover: true });
    expect(await store.renewLease?.(keyOf(request), request.owner, 30)).toBe(false);
    expect(createMariadbIdempotencyStore(db, { leaseRenewal: false }).renewLease).toBeUndefined();
  });
});

describe('takeover', () => {
  it('after the lease ends, the same request takes over; the old owner is fenced (zombie)', async () => {
    const zombie = claimRequest();
    await store.claim(zombie);
    const retry = { ...zombie, owner: randomUUID() };
    expect((await store.claim(retry)).claimed).toBe(false);
    await updateRow(zombie, 'locked_until = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))');
    expect((await store.find(keyOf(zombie)))?.leaseActive).toBe(false);
    expect(await store.claim(retry)).toEqual({ claimed: true, takeover: true });
    expect(await store.find(keyOf(zombie))).toMatchObject({ leaseOwner: retry.owner, leaseActive: true });
    expect(await store.complete(keyOf(zombie), zombie.owner, output)).toBe(false);
    expect(await store.release(keyOf(zombie), zombie.owner)).toBe(false);
    const retryOutput: StoredResponse = { ...output, body: '{"json":"retry"}' };
    expect(await store.complete(keyOf(retry), retry.owner, retryOutput)).toBe(true);
    expect((await store.find(keyOf(zombie)))?.response).toEqual(retryOutput);
  });

  it('20 concurrent takeovers of one dead lease: exactly one wins', async () => {
    const dead = claimRequest();
    await store.claim(dead);
    await updateRow(dead, 'locked_until = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))');
    const results = await Promise.all(
      Array.from({ length: 20 }, () => store.claim({ ...dead, owner: randomUUID() })),
    );
    expect(results.filter((result) => result.claimed)).toEqual([{ claimed: true, takeover: true }]);
  });

  it('a different request (fingerprint) cannot take over an expired lease', async () => {
    const first = claimRequest();
    await store.claim(first);
    await updateRow(first, 'locked_until = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))');
    const result = await store.claim({ ...first, owner: randomUUID(), fingerprint: fingerprintB });
    expect(result).toMatchObject({
      claimed: false,
      record: { fingerprint: fingerprintA, leaseActive: false },
    });
    expect(await store.complete(keyOf(first), first.owner, output)).toBe(true);
  });

  it('a completed key is never taken over before it expires, even past its lease', async () => {
    const first = claimRequest({ leaseSeconds: 1 });
    await store.claim(first);
    await store.complete(keyOf(first), first.owner, output);
    await updateRow(first, 'created_at = TIMESTAMPADD(HOUR, -1, UTC_TIMESTAMP(6))');
    expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);
  });

  it('an expired record is claimed as new, even with another fingerprint; its replay count restarts', async () => {
    const first = claimRequest();
    await store.claim(first);
    await store.complete(keyOf(first), first.owner, output);
    await store.countReplay(keyOf(first));
    const next = { ...first, owner: randomUUID(), fingerprint: fingerprintB, retentionSeconds: 60 };
    expect((await store.claim(next)).claimed).toBe(false);
    await updateRow(first, 'expires_at = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))');
    expect(await store.claim(next)).toEqual({ claimed: true, takeover: true });
    expect(await store.find(keyOf(first))).toMatchObject({
      fingerprint: fingerprintB,
      state: 'processing',
      response: null,
      leaseOwner: next.owner,
      replayCount: 0,
    });
    const [row] = await db.$queryRawUnsafe<Array<{ retention: bigint; http_status: number | null }>>(
      `SELECT TIMESTAMPDIFF(SECOND, created_at, expires_at) AS retention, http_status FROM idempotency_keys WHERE ${where}`,
      first.scope,
      first.procedure,
      first.key,
    );
    expect({ retention: Number(row?.retention), http_status: row?.http_status }).toEqual({
      retention: 60,
      http_status: null,
    });
  });

  it('an expired record whose lease is still live is not taken over (the request is still running)', async () => {
    const running = claimRequest();
    await store.claim(running);
    await updateRow(running, 'expires_at = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))');
    expect((await store.claim({ ...running, owner: randomUUID(), fingerprint: fingerprintB })).claimed).toBe(
      false,
    );
    expect(await store.complete(keyOf(running), running.owner, output)).toBe(true);
  });
});

describe('in-flight cap', () => {
  const cap = { max: 3, retryAfterSeconds: 2 };

  it('refuses the (max+1)-th new key of a scope and stores nothing; duplicates and own dead leases still pass', async () => {
    const scope = uniqueScope();
    const claims = Array.from({ length: 3 }, () => claimRequest({ scope, inFlightCap: cap }));
    for (const request of claims) expect((await store.claim(request)).claimed).toBe(true);
    const extra = claimRequest({ scope, inFlightCap: cap });
    await expect(store.claim(extra)).rejects.toMatchObject({
      code: 'idempotency_too_many_in_flight',
      retryAfterSeconds: 2,
    });
    expect(await rowCount(extra)).toBe(0);
    // Control: the same claim without a cap inserts.
    expect((await store.claim(claimRequest({ scope }))).claimed).toBe(true);

    const first = claims[0] as ClaimRequest;
    expect(await store.claim({ ...first, owner: randomUUID() })).toMatchObject({ claimed: false });
    // An expired key reused by a new request is new: refused at the cap.
    const reused = claims[1] as ClaimRequest;
    await store.complete(keyOf(reused), reused.owner, output);
    await updateRow(reused, 'expires_at = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))');
    await store.claim(claimRequest({ scope })); // back at the cap (3 live: first, third, the uncapped two)
    await expect(
      store.claim({ ...reused, owner: randomUUID(), fingerprint: fingerprintB }),
    ).rejects.toMatchObject({
      code: 'idempotency_too_many_in_flight',
    });
    // The same request resuming its own dead lease is not new.
    await updateRow(first, 'locked_until = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6))');
    expect(await store.claim({ ...first, owner: randomUUID() })).toEqual({ claimed: true, takeover: true });
  });
});

describe('transaction', () => {
  it('an uncommitted claim blocks a duplicate until innodb_lock_wait_timeout; isLockTimeout recognises error 1205', async () => {
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
      { lockTimeoutMs: 10_000, timeoutMs: 20_000 },
    );
    await claimed.promise;
    expect(await store.find(keyOf(request))).toBeNull();
    const duplicate = { ...request, owner: randomUUID() };
    const error = await store
      .transaction((tx) => store.claim(duplicate, tx), { lockTimeoutMs: 200, timeoutMs: 5_000 })
      .then(
        () => null,
        (caught: unknown) => caught,
      );
    expect(error).not.toBeNull();
    expect(store.isLockTimeout(error)).toBe(true);
    expect(store.isLockTimeout(new Error('connection refused'))).toBe(false);
    expect(store.isLockTimeout(null)).toBe(false);
    holding.resolve();
    expect(await first).toEqual({ claimed: true, takeover: false });
    const replay = await store.transaction((tx) => store.claim(duplicate, tx), {
      lockTimeoutMs: 200,
      timeoutMs: 5_000,
    });
    expect(replay).toMatchObject({ claimed: false, record: { state: 'completed', response: output } });
  });

  it('a duplicate waiting on the lock gets the record once the first commits (a locking read, not its snapshot)', async () => {
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
    const duplicate = store.transaction(
      async (tx) => {
        // A read first: the transaction's snapshot now predates the first claim's commit.
        await tx.$queryRawUnsafe('SELECT COUNT(*) FROM idempotency_keys');
        const result = await store.claim({ ...request, owner: randomUUID() }, tx);
        // Control: a plain read in this transaction still sees no row (its snapshot); the store's locking read did.
        const plain = await tx.$queryRawUnsafe<unknown[]>(
          `SELECT 1 FROM idempotency_keys WHERE ${where}`,
          request.scope,
          request.procedure,
          request.key,
        );
        expect(plain).toEqual([]);
        return result;
      },
      { lockTimeoutMs: 5_000, timeoutMs: 10_000 },
    );
    setTimeout(holding.resolve, 100);
    await first;
    expect(await duplicate).toMatchObject({
      claimed: false,
      record: { state: 'completed', response: output },
    });
  });

  it('through the handler: a duplicate that outwaits the lock bound is a 409 in progress, not a 500', async () => {
    const options = resolveOptions({ lockTimeoutMs: 1_000 });
    const request = claimRequest();
    const holding = deferred();
    const claimed = deferred();
    const first = handleTransactional(store, options, request, async () => {
      claimed.resolve();
      await holding.promise;
      return { result: 'first', response: output };
    });
    await claimed.promise;
    const duplicate = await handleTransactional(store, options, request, async () => ({
      result: 'duplicate',
      response: output,
    })).catch((error: unknown) => error);
    expect(duplicate).toBeInstanceOf(IdempotencyError);
    expect(duplicate).toMatchObject({ code: 'idempotency_request_in_progress', httpStatus: 409 });
    holding.resolve();
    expect(await first).toMatchObject({ kind: 'executed', result: 'first' });
    // Control: once the first has committed, the same duplicate replays.
    expect(
      await handleTransactional(store, options, request, async () => ({ result: 'late', response: output })),
    ).toMatchObject({ kind: 'replayed', response: output });
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

  it("the lock wait bound is per statement: the pooled connection's session keeps its own innodb_lock_wait_timeout", async () => {
    const sessions = await store.transaction(
      async (tx) => {
        await store.claim(claimRequest(), tx);
        return tx.$queryRawUnsafe<Array<{ session: bigint; global: bigint }>>(
          'SELECT @@session.innodb_lock_wait_timeout AS session, @@global.innodb_lock_wait_timeout AS global',
        );
      },
      { lockTimeoutMs: 1_234, timeoutMs: 5_000 },
    );
    expect(Number(sessions[0]?.session)).toBe(Number(sessions[0]?.global));
  });
});

describe('claim with a response (a stored error recorded after its rollback)', () => {
  const declined: StoredResponse = {
    kind: 'error',
    httpStatus: 402,
    code: 'PAYMENT_REQUIRED',
    message: 'Declined',
  };

  it('inserts the key already completed, without a lease; never overwrites a live key', async () => {
    const request = claimRequest({ response: declined });
    expect(await store.claim(request)).toEqual({ claimed: true, takeover: false });
    expect(await store.find(keyOf(request))).toMatchObject({
      state: 'completed',
      response: declined,
      leaseOwner: null,
      leaseActive: false,
    });
    const first = claimRequest();
    await store.claim(first);
    await store.complete(keyOf(first), first.owner, output);
    expect(await store.claim({ ...first, owner: randomUUID(), response: declined })).toMatchObject({
      claimed: false,
      record: { state: 'completed', response: output },
    });
  });
});

describe('cleanup', () => {
  async function withPrivateTable(fn: (table: string) => Promise<void>) {
    const table = uniqueTableName('idem_keys');
    await mariadb.scratch.execute(mariadbIdempotencyKeysSchema(table).statements);
    try {
      await fn(table);
    } finally {
      await db.$executeRawUnsafe(`DROP TABLE \`${table}\``);
    }
  }

  const shapes: Record<string, string> = {
    expiredCompleted: `'completed', NULL, NULL, -172800, -1`,
    expiredDeadLease: `'processing', UUID(), -60, -172800, -1`,
    expiredLiveLease: `'processing', UUID(), 60, -172800, -1`,
    liveCompleted: `'completed', NULL, NULL, 0, 86400`,
    liveProcessing: `'processing', UUID(), -60, 0, 86400`,
  };
  /** Inserts `count` rows of one shape: state, owner, lease / created / expires as seconds from now. */
  async function seed(table: string, kind: string, count: number) {
    const [state, owner, lease, created, expires] = (shapes[kind] as string).split(', ');
    const at = (seconds: string | undefined) =>
      seconds === 'NULL' ? 'NULL' : `TIMESTAMPADD(SECOND, ${seconds}, UTC_TIMESTAMP(6))`;
    const rows = Array.from(
      { length: count },
      (_, i) =>
        `('cleanup', '${kind}', '${i + 1}', REPEAT('0', 64), ${state}, ${owner}, ${at(lease)}, ${at(created)}, ${at(expires)})`,
    );
    await db.$executeRawUnsafe(
      `INSERT INTO \`${table}\` (scope, \`procedure\`, \`key\`, fingerprint, state, lease_owner, locked_until, created_at, expires_at)
       VALUES ${rows.join(', ')}`,
    );
  }

  async function countsByKind(table: string): Promise<Record<string, number>> {
    const rows = await db.$queryRawUnsafe<Array<{ kind: string; n: bigint }>>(
      `SELECT CAST(\`procedure\` AS CHAR) AS kind, COUNT(*) AS n FROM \`${table}\` GROUP BY \`procedure\``,
    );
    return Object.fromEntries(rows.map((row) => [row.kind, Number(row.n)]));
  }

  it('rejects a table name that is not an identifier', () => {
    expect(() => createMariadbIdempotencyStore(db, { table: 'keys; drop table x' })).toThrow(/Invalid table/);
    expect(() => createMariadbIdempotencyStore(db, { table: 'test.idempotency_keys' })).not.toThrow();
  });

  it('deletes exactly the expired rows without a live lease, in batches', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createMariadbIdempotencyStore(db, { table });
      await seed(table, 'expiredCompleted', 15);
      await seed(table, 'expiredDeadLease', 5);
      await seed(table, 'expiredLiveLease', 4);
      await seed(table, 'liveCompleted', 6);
      await seed(table, 'liveProcessing', 3);
      expect(await privateStore.deleteExpiredBatch(7)).toBe(7);
      expect(await cleanupExpiredKeys(privateStore, { batchSize: 6 })).toEqual({ deleted: 13, batches: 3 });
      expect(await countsByKind(table)).toEqual({ expiredLiveLease: 4, liveCompleted: 6, liveProcessing: 3 });
      expect(await cleanupExpiredKeys(privateStore, { batchSize: 6 })).toEqual({ deleted: 0, batches: 1 });
      expect(
        await privateStore.find({ scope: 'cleanup', procedure: 'liveCompleted', key: '1' }),
      ).toMatchObject({
        state: 'completed',
      });
    });
  });

  it('a deadlock victim (the cleanup crossing a transaction that locks rows the other way) is run again; control: the bare DELETE fails with 1213', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createMariadbIdempotencyStore(db, { table });
      const rowLock = (key: string) =>
        `SELECT 1 FROM \`${table}\` WHERE scope = 'cleanup' AND \`procedure\` = 'expiredCompleted' AND \`key\` = '${key}' FOR UPDATE`;
      const lockWaits = async () => {
        const [row] = await db.$queryRawUnsafe<Array<{ n: bigint }>>(
          "SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
          `%${table}%`,
        );
        return Number(row?.n ?? 0);
      };
      /**
       * A transaction that first writes many rows of another table (so InnoDB picks the other side as the victim,
       * without locking anything of the key table), locks key 2, waits until `cleanup` (which deletes in
       * expires_at order: key 1, then key 2) is blocked on it, then locks key 1: a cycle.
       */
      async function crossing(cleanup: () => Promise<number>) {
        await seed(table, 'expiredCompleted', 2);
        await seed(table, 'liveCompleted', 50);
        await db.$executeRawUnsafe(`CREATE TABLE IF NOT EXISTS \`${table}_weight\` (i INT NOT NULL)`);
        let result: Promise<number | unknown> = Promise.resolve(null);
        await db.$transaction(
          async (tx) => {
            await tx.$executeRawUnsafe(
              `INSERT INTO \`${table}_weight\` (i) VALUES ${Array.from({ length: 200 }, (_, i) => `(${i})`).join(', ')}`,
            );
            await tx.$queryRawUnsafe(rowLock('2'));
            result = cleanup().catch((error: unknown) => error);
            await waitUntil(async () => (await lockWaits()) > 0);
            await tx.$queryRawUnsafe(rowLock('1'));
          },
          { timeout: 20_000 },
        );
        return result;
      }

      expect(await crossing(() => privateStore.deleteExpiredBatch(10))).toBe(2);
      expect(await countsByKind(table)).toEqual({ liveCompleted: 50 });

      await db.$executeRawUnsafe(`DELETE FROM \`${table}\``);
      const control = await crossing(() =>
        db.$executeRawUnsafe(
          `DELETE FROM \`${table}\` WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT 10`,
        ),
      );
      expect(control).toBeInstanceOf(Error);
      expect(String((control as Error).message)).toMatch(/1213|Deadlock/);
      expect(privateStore.isLockTimeout(control)).toBe(true);
      await db.$executeRawUnsafe(`DROP TABLE \`${table}_weight\``);
    });
  });

  it('concurrent cleanups and claims of the same expired keys: every expired row deleted once, every claim owns its key', async () => {
    await withPrivateTable(async (table) => {
      const privateStore = createMariadbIdempotencyStore(db, { table });
      await seed(table, 'expiredCompleted', 400);
      await seed(table, 'liveCompleted', 50);
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
      const [first, second, ...claimed] = await Promise.all([
        cleanupExpiredKeys(privateStore, { batchSize: 50 }),
        cleanupExpiredKeys(privateStore, { batchSize: 50 }),
        ...claims,
      ]);
      expect(claimed.every((result) => result.claimed)).toBe(true);
      const deleted = (first?.deleted ?? 0) + (second?.deleted ?? 0);
      expect(deleted).toBeGreaterThanOrEqual(380);
      expect(deleted).toBeLessThanOrEqual(400);
      expect(await countsByKind(table)).toEqual({ expiredCompleted: 20, liveCompleted: 50 });
    });
  });
});
