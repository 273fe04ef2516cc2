/**
 * The store contract every engine keeps (core/store.ts), as ONE suite run on each real database: claim, complete
 * and release fenced by the lease owner, countReplay, lease renewal, takeover, the in-flight cap, transactions
 * and their lock bound, claim with a response, cleanup. Each engine's test file calls
 * `describeStoreContract(name, setup)` once and keeps only the tests of what is its own.
 *
 * The rules live here; a backend (`StoreBackend`) gives what the rules need from an engine: its store, and
 * (`EngineRows`) a way to set a row's times and read them back with the engine's own SQL and clock, row counts,
 * a private key table for cleanup. Where engines differ (the precision of a stored duration, which table names
 * are valid, whether a read can pass an open transaction on the same client), the backend states it as data.
 * The helpers an engine's own tests share with the suite (`withKeyTable`, `seedCleanupRows`, `claimHeldOpen`)
 * are exported beside it.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveOptions } from '../../src/core/config.ts';
import { handleTransactional } from '../../src/core/transactional.ts';
import {
  type ClaimRequest,
  type ClaimResult,
  IdempotencyError,
  type IdempotencyRecord,
  type IdempotencyStore,
  type RecordKey,
  type StoredResponse,
  type TransactionOptions,
} from '../../src/index.ts';
import { cleanupExpiredKeys } from '../../src/prisma/index.ts';
import { deferred, sleep, uniqueScope, uniqueTableName } from './db.ts';
import { claimRequest, fingerprintA, fingerprintB, keyOf, output } from './store-fixtures.ts';

/** The times of a key's row that a test moves (to end a lease, expire a key, age a row). */
export type TimeColumn = 'locked_until' | 'expires_at' | 'created_at';

/** What the contract reads of a key's row, measured in the database by its own SQL and clock. */
export interface RowFacts {
  httpStatus: number | null;
  /** expires_at − created_at, in seconds. */
  retentionSeconds: number;
  /** locked_until − created_at, in seconds; null when the row has no lease (locked_until is null). */
  leaseSeconds: number | null;
  /** locked_until − the database's now, in seconds; null without a lease. */
  leaseLeftSeconds: number | null;
  /** The database's now − created_at, in seconds. */
  ageSeconds: number;
}

/** A row that cleanup must tell apart from the others: its state and times (seconds from now, null: none). */
export interface SeedShape {
  state: 'processing' | 'completed';
  /** A processing row has an owner and this lease end; a completed one has neither. */
  lockedUntil: number | null;
  createdAt: number;
  expiresAt: number;
}

/** The shapes cleanup is tested on, each seeded under a procedure of its name (scope 'cleanup', keys '1'…). */
export const CLEANUP_SHAPES = {
  /** Completed, past retention → deleted. */
  expiredCompleted: { state: 'completed', lockedUntil: null, createdAt: -172_800, expiresAt: -1 },
  /** Processing, past retention, lease ended (its owner died) → deleted. */
  expiredDeadLease: { state: 'processing', lockedUntil: -60, createdAt: -172_800, expiresAt: -1 },
  /** Processing, past retention, lease live (still running) → kept. */
  expiredLiveLease: { state: 'processing', lockedUntil: 60, createdAt: -172_800, expiresAt: -1 },
  /** Within retention → kept. */
  liveCompleted: { state: 'completed', lockedUntil: null, createdAt: 0, expiresAt: 86_400 },
  liveProcessing: { state: 'processing', lockedUntil: -60, createdAt: 0, expiresAt: 86_400 },
} as const satisfies Record<string, SeedShape>;
export type CleanupKind = keyof typeof CLEANUP_SHAPES;

/**
 * The engine's own SQL for the rows the contract looks at: on the store's real key table (`key` arguments) or on
 * a private key table (`table` arguments; cleanup deletes every expired row of its table, and other test files
 * share the real one).
 */
export interface EngineRows {
  /** Sets `column` of `key`'s row to `seconds` from the database's clock (negative: in the past). */
  setTime(key: RecordKey, column: TimeColumn, seconds: number): Promise<void>;
  /** `key`'s row; null when there is none. */
  readRow(key: RecordKey): Promise<RowFacts | null>;
  /** How many rows `key` has. */
  rowCount(key: RecordKey): Promise<number>;
  /** Creates an empty key table `table` of the library's schema. */
  createKeyTable(table: string): Promise<void>;
  dropTable(table: string): Promise<void>;
  /** Inserts `count` rows of `shape` into `table`: scope 'cleanup', procedure `procedure`, keys '1' … `count`. */
  seed(table: string, procedure: string, shape: SeedShape, count: number): Promise<void>;
  /** Rows of `table` per procedure (= per seeded kind). */
  countsByProcedure(table: string): Promise<Record<string, number>>;
}

/** What the contract needs from one engine. `TTx` is its store's transaction handle. */
export interface StoreBackend<TTx> extends EngineRows {
  /** The store under test, on the engine's real key table. */
  store: IdempotencyStore<TTx>;
  /**
   * Reads `store`'s table on another connection: what a concurrent request sees while a transaction of `store`
   * is still open (SQLite's client has one connection, on which everything else queues behind that transaction).
   */
  observer: { find(key: RecordKey): Promise<IdempotencyRecord | null> };
  /** Another store of the same engine and client. */
  createStore(options: { table?: string; leaseRenewal?: boolean }): IdempotencyStore<TTx>;
  /**
   * How far (seconds) a stored duration may read from what was asked: 0 where the engine stores and subtracts
   * times exactly (microseconds), more where it computes differences in floating point.
   */
  durationTolerance: number;
  /** Table names the store accepts (a schema-qualified one where the engine has schemas). */
  validTableNames: readonly string[];
}

/** Runs `fn` on a new, empty key table of the library's schema, dropped afterwards. */
export async function withKeyTable(rows: EngineRows, fn: (table: string) => Promise<void>): Promise<void> {
  const table = uniqueTableName('idem_keys');
  await rows.createKeyTable(table);
  try {
    await fn(table);
  } finally {
    await rows.dropTable(table);
  }
}

/** Inserts `count` rows of the cleanup shape `kind` into `table` (procedure `kind`, keys '1' … `count`). */
export function seedCleanupRows(rows: EngineRows, table: string, kind: CleanupKind, count: number) {
  return rows.seed(table, kind, CLEANUP_SHAPES[kind], count);
}

/**
 * A first request still running when its duplicate arrives: claims `request` in a transaction of `store` and
 * holds it open until `commit()`, then completes it with `output` and commits. Resolves once the claim is in.
 */
export async function claimHeldOpen<TTx>(
  store: IdempotencyStore<TTx>,
  request: ClaimRequest,
  bounds: TransactionOptions = { lockTimeoutMs: 5_000, timeoutMs: 10_000 },
): Promise<{ commit: () => void; committed: Promise<ClaimResult> }> {
  const claimed = deferred();
  const holding = deferred();
  const committed = store.transaction(async (tx) => {
    const result = await store.claim(request, tx);
    claimed.resolve();
    await holding.promise;
    await store.complete(request, request.owner, output, tx);
    return result;
  }, bounds);
  // A claim that fails rejects `committed` before `claimed` would resolve.
  await Promise.race([claimed.promise, committed]);
  return { commit: holding.resolve, committed };
}

/**
 * Registers the store contract for one engine. `setup` runs in the suite's beforeAll (after the engine file's
 * own beforeAll, which connects), so it may use the file's client.
 */
export function describeStoreContract<TTx>(
  engine: string,
  setup: () => StoreBackend<TTx> | Promise<StoreBackend<TTx>>,
): void {
  let backend: StoreBackend<TTx>;
  let store: IdempotencyStore<TTx>;

  /** `actual` seconds is `expected` within the engine's precision. */
  function expectDuration(actual: number | null | undefined, expected: number) {
    expect(actual).toEqual(expect.any(Number));
    expect(Math.abs((actual ?? Number.NaN) - expected)).toBeLessThanOrEqual(backend.durationTolerance);
  }

  describe(`${engine} store contract`, () => {
    beforeAll(async () => {
      backend = await setup();
      store = backend.store;
    });

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
          expect(result).toMatchObject({
            claimed: false,
            record: {
              fingerprint: fingerprintA,
              state: 'processing',
              leaseOwner: first.owner,
              leaseActive: true,
            },
          });
        }
        expect(await backend.rowCount(first)).toBe(1);
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

      it("takes all times from the database's clock, to a fraction of a second, not the app's clock", async () => {
        const request = claimRequest({ leaseSeconds: 45.5, retentionSeconds: 7_200 });
        // The app's clock is 25 years off; the database's is not.
        vi.useFakeTimers({ toFake: ['Date'], now: new Date('2000-01-01T00:00:00Z') });
        try {
          await store.claim(request);
        } finally {
          vi.useRealTimers();
        }
        const row = await backend.readRow(request);
        expectDuration(row?.retentionSeconds, 7_200);
        expectDuration(row?.leaseSeconds, 45.5);
        expect(row?.ageSeconds).toBeGreaterThanOrEqual(0);
        expect(row?.ageSeconds).toBeLessThan(60);
        const record = await store.find(keyOf(request));
        expect(record?.createdAt.getUTCFullYear()).not.toBe(2000);
        // Stored and read back in UTC: the record's time is the real time.
        expect(Math.abs((record?.createdAt.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
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
        expect(await backend.rowCount(base)).toBe(1);
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
        expect(await backend.readRow(request)).toMatchObject({ httpStatus: 200, leaseSeconds: null });

        // Completed once: a second completion (even by the former owner) changes nothing.
        const other: StoredResponse = {
          kind: 'error',
          httpStatus: 402,
          code: 'PAYMENT_REQUIRED',
          message: 'x',
        };
        expect(await store.complete(keyOf(request), request.owner, other)).toBe(false);
        expect((await store.find(keyOf(request)))?.response).toEqual(output);
      });

      it('stores an error response with its cause (non-ASCII text intact), and a 200 kB body whole', async () => {
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

      it('release with the right owner deletes the claim; another owner, or a completed key, is kept', async () => {
        const request = claimRequest();
        await store.claim(request);
        expect(await store.release(keyOf(request), randomUUID())).toBe(false);
        expect(await backend.rowCount(request)).toBe(1);
        expect(await store.release(keyOf(request), request.owner)).toBe(true);
        expect(await backend.rowCount(request)).toBe(0);
        // Released: the key is free for a retry.
        expect(await store.claim({ ...request, owner: randomUUID() })).toEqual({
          claimed: true,
          takeover: false,
        });

        const completed = claimRequest();
        await store.claim(completed);
        await store.complete(keyOf(completed), completed.owner, output);
        expect(await store.release(keyOf(completed), completed.owner)).toBe(false);
        expect(await backend.rowCount(completed)).toBe(1);
      });

      it('countReplay adds the replays it is given', async () => {
        const request = claimRequest();
        await store.claim(request);
        await store.complete(keyOf(request), request.owner, output);
        await store.countReplay(keyOf(request), 1);
        await store.countReplay(keyOf(request), 4);
        expect((await store.find(keyOf(request)))?.replayCount).toBe(5);
      });
    });

    describe('lease renewal', () => {
      it('renewLease extends only the owner’s live processing lease; a renewed lease is not taken over (control: left to end, it is)', async () => {
        const request = claimRequest();
        await store.claim(request);
        await backend.setTime(request, 'locked_until', 1);
        expect(await store.renewLease?.(keyOf(request), randomUUID(), 600)).toBe(false);
        expect(await store.renewLease?.(keyOf(request), request.owner, 600)).toBe(true);
        expect((await backend.readRow(request))?.leaseLeftSeconds).toBeGreaterThan(500);
        expect((await store.claim({ ...request, owner: randomUUID() })).claimed).toBe(false);

        // Control: the same lease left to end is taken over by the retry, and the old owner renews nothing.
        await backend.setTime(request, 'locked_until', -1);
        const retry = { ...request, owner: randomUUID() };
        expect(await store.claim(retry)).toEqual({ claimed: true, takeover: true });
        expect(await store.renewLease?.(keyOf(request), request.owner, 600)).toBe(false);
        // A completed key has no lease to renew, not even its last owner's.
        await store.complete(keyOf(retry), retry.owner, output);
        expect(await store.renewLease?.(keyOf(retry), retry.owner, 600)).toBe(false);

        expect(backend.createStore({ leaseRenewal: false }).renewLease).toBeUndefined();
      });

      it('a store made without options renews leases (only `leaseRenewal: false` leaves renewLease out)', async () => {
        for (const renewing of [backend.createStore({}), backend.createStore({ leaseRenewal: true })]) {
          const request = claimRequest();
          await renewing.claim(request);
          await backend.setTime(request, 'locked_until', 1);
          expect(await renewing.renewLease?.(keyOf(request), request.owner, 600)).toBe(true);
          expect((await backend.readRow(request))?.leaseLeftSeconds).toBeGreaterThan(500);
        }
      });
    });

    describe('takeover', () => {
      it('after the lease ends, the same request takes over; the old owner is fenced (zombie)', async () => {
        const zombie = claimRequest();
        await store.claim(zombie);
        const retry = { ...zombie, owner: randomUUID() };
        // Control: while the lease is live, the retry does not take over.
        expect((await store.claim(retry)).claimed).toBe(false);

        await backend.setTime(zombie, 'locked_until', -1);
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
        await backend.setTime(dead, 'locked_until', -1);
        const results = await Promise.all(
          Array.from({ length: 20 }, () => store.claim({ ...dead, owner: randomUUID() })),
        );
        expect(results.filter((result) => result.claimed)).toEqual([{ claimed: true, takeover: true }]);
      });

      it('a different request (fingerprint) cannot take over an expired lease', async () => {
        const first = claimRequest();
        await store.claim(first);
        await backend.setTime(first, 'locked_until', -1);
        expect(await store.claim({ ...first, owner: randomUUID(), fingerprint: fingerprintB })).toMatchObject(
          {
            claimed: false,
            record: { fingerprint: fingerprintA, leaseOwner: first.owner, leaseActive: false },
          },
        );
        // The original owner can still finish: nobody took over.
        expect(await store.complete(keyOf(first), first.owner, output)).toBe(true);
      });

      it('a completed key is never taken over before it expires, even past its lease', async () => {
        const first = claimRequest({ leaseSeconds: 1 });
        await store.claim(first);
        await store.complete(keyOf(first), first.owner, output);
        await backend.setTime(first, 'created_at', -3_600);
        expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);
      });

      it('an expired record is claimed as new, even with another fingerprint; its replay count and retention restart', async () => {
        const first = claimRequest();
        await store.claim(first);
        await store.complete(keyOf(first), first.owner, output);
        await store.countReplay(keyOf(first), 1);
        const next = { ...first, owner: randomUUID(), fingerprint: fingerprintB, retentionSeconds: 60 };
        // Control: not expired yet → the stored record.
        expect((await store.claim(next)).claimed).toBe(false);

        await backend.setTime(first, 'expires_at', -1);
        expect(await store.claim(next)).toEqual({ claimed: true, takeover: true });
        expect(await store.find(keyOf(first))).toMatchObject({
          fingerprint: fingerprintB,
          state: 'processing',
          response: null,
          leaseOwner: next.owner,
          replayCount: 0,
        });
        const row = await backend.readRow(first);
        expectDuration(row?.retentionSeconds, 60);
        expect(row?.httpStatus).toBeNull();
      });

      it('an expired record whose lease is still live is not taken over (the request is still running)', async () => {
        const running = claimRequest();
        await store.claim(running);
        await backend.setTime(running, 'expires_at', -1);
        const result = await store.claim({ ...running, owner: randomUUID(), fingerprint: fingerprintB });
        expect(result.claimed).toBe(false);
        expect(await store.complete(keyOf(running), running.owner, output)).toBe(true);
      });
    });

    describe('per-principal in-flight cap', () => {
      it('a cap of Infinity is no cap: every new key of the scope is claimed', async () => {
        const scope = uniqueScope();
        const cap = { max: Number.POSITIVE_INFINITY, retryAfterSeconds: 1 };
        for (let i = 0; i < 3; i += 1)
          expect(await store.claim(claimRequest({ scope, inFlightCap: cap }))).toEqual({
            claimed: true,
            takeover: false,
          });
      });

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
        // Control: once a slot is freed the same claim passes.
        await store.complete(keyOf(first), first.owner, output);
        expect(await store.claim(third)).toEqual({ claimed: true, takeover: false });
      });

      it('refuses the (max+1)-th new key of a scope and stores nothing; an expired key reused is new; duplicates and own dead leases still pass', async () => {
        const cap = { max: 3, retryAfterSeconds: 2 };
        const scope = uniqueScope();
        const claims = Array.from({ length: 3 }, () => claimRequest({ scope, inFlightCap: cap }));
        for (const request of claims) expect((await store.claim(request)).claimed).toBe(true);
        const extra = claimRequest({ scope, inFlightCap: cap });
        await expect(store.claim(extra)).rejects.toMatchObject({
          code: 'idempotency_too_many_in_flight',
          retryAfterSeconds: 2,
        });
        expect(await backend.rowCount(extra)).toBe(0);
        // Control: the same claim without a cap inserts.
        expect((await store.claim(claimRequest({ scope }))).claimed).toBe(true);

        const first = claims[0] as ClaimRequest;
        expect(await store.claim({ ...first, owner: randomUUID() })).toMatchObject({ claimed: false });
        // An expired key reused by a new request is new: refused at the cap.
        const reused = claims[1] as ClaimRequest;
        await store.complete(keyOf(reused), reused.owner, output);
        await backend.setTime(reused, 'expires_at', -1);
        await store.claim(claimRequest({ scope })); // back at the cap (3 live: first, third, the uncapped two)
        await expect(
          store.claim({ ...reused, owner: randomUUID(), fingerprint: fingerprintB }),
        ).rejects.toMatchObject({ code: 'idempotency_too_many_in_flight' });
        // The same request resuming its own dead lease is not new.
        await backend.setTime(first, 'locked_until', -1);
        expect(await store.claim({ ...first, owner: randomUUID() })).toEqual({
          claimed: true,
          takeover: true,
        });
      });
    });

    describe('transaction', () => {
      it('an uncommitted claim is invisible outside and blocks a duplicate until the lock bound (isLockTimeout: yes); once committed, the duplicate replays', async () => {
        const request = claimRequest();
        const first = await claimHeldOpen(store, request, { lockTimeoutMs: 10_000, timeoutMs: 20_000 });
        // Uncommitted: invisible outside.
        expect(await backend.observer.find(keyOf(request))).toBeNull();

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
        // Control: other errors are not lock timeouts.
        expect(store.isLockTimeout(new Error('connection refused'))).toBe(false);
        expect(store.isLockTimeout(new Error('SQLITE_CORRUPT: database disk image is malformed'))).toBe(
          false,
        );
        expect(store.isLockTimeout(null)).toBe(false);

        first.commit();
        expect(await first.committed).toEqual({ claimed: true, takeover: false });
        // Committed: a duplicate now reads the completed record at once.
        const replay = await store.transaction((tx) => store.claim(duplicate, tx), {
          lockTimeoutMs: 200,
          timeoutMs: 5_000,
        });
        expect(replay).toMatchObject({ claimed: false, record: { state: 'completed', response: output } });
      });

      it('a duplicate waiting on the lock gets the record once the first commits', async () => {
        const request = claimRequest();
        const first = await claimHeldOpen(store, request);
        const duplicate = store.transaction((tx) => store.claim({ ...request, owner: randomUUID() }, tx), {
          lockTimeoutMs: 5_000,
          timeoutMs: 10_000,
        });
        setTimeout(first.commit, 100);
        await first.committed;
        expect(await duplicate).toMatchObject({
          claimed: false,
          record: { state: 'completed', response: output },
        });
      });

      it('through the handler: a duplicate that outwaits the lock bound is a 409 in progress, not a 500', async () => {
        // A short bound (MariaDB rounds it up to its 1 s minimum).
        const options = resolveOptions({ lockTimeoutMs: 300 });
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
          await handleTransactional(store, options, request, async () => ({
            result: 'late',
            response: output,
          })),
        ).toMatchObject({ kind: 'replayed', response: output });
      });

      it('a transaction may run for timeoutMs plus lockTimeoutMs (the lock wait comes on top of the work)', async () => {
        // A pooled connection first: timeoutMs also bounds the wait for one, which a new connection on a loaded
        // machine could outlast.
        await store.transaction(async () => undefined, { timeoutMs: 5_000, lockTimeoutMs: 100 });
        const request = claimRequest();
        const result = await store.transaction(
          async (tx) => {
            await store.claim(request, tx);
            await sleep(800);
            return store.complete(keyOf(request), request.owner, output, tx);
          },
          { timeoutMs: 500, lockTimeoutMs: 1_500 },
        );
        expect(result).toBe(true);
        expect(await store.find(keyOf(request))).toMatchObject({ state: 'completed', response: output });
      });

      it('a transaction still running past timeoutMs plus lockTimeoutMs is rolled back', async () => {
        const request = claimRequest();
        await expect(
          store.transaction(
            async (tx) => {
              await store.claim(request, tx);
              await sleep(1_500);
              return store.complete(keyOf(request), request.owner, output, tx);
            },
            { timeoutMs: 100, lockTimeoutMs: 200 },
          ),
        ).rejects.toThrow();
        expect(await store.find(keyOf(request))).toBeNull();
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
        expect(await backend.readRow(request)).toMatchObject({ httpStatus: 402, leaseSeconds: null });
      });

      it('takes over an expired key as completed: the new response, its status, no lease', async () => {
        const first = claimRequest();
        await store.claim(first);
        await store.complete(keyOf(first), first.owner, output);
        await backend.setTime(first, 'expires_at', -1);
        const late = { ...first, owner: randomUUID(), fingerprint: fingerprintB, response: declined };
        expect(await store.claim(late)).toEqual({ claimed: true, takeover: true });
        expect(await store.find(keyOf(first))).toMatchObject({
          fingerprint: fingerprintB,
          state: 'completed',
          response: declined,
          leaseOwner: null,
          leaseActive: false,
        });
        expect(await backend.readRow(first)).toMatchObject({ httpStatus: 402, leaseSeconds: null });
      });

      it('never overwrites a live key: returns it instead', async () => {
        const first = claimRequest();
        await store.claim(first);
        await store.complete(keyOf(first), first.owner, output);
        const late = await store.claim({ ...first, owner: randomUUID(), response: declined });
        expect(late).toMatchObject({ claimed: false, record: { state: 'completed', response: output } });
      });
    });

    describe('cleanup', () => {
      const seed = (table: string, kind: CleanupKind, count: number) =>
        seedCleanupRows(backend, table, kind, count);
      /** 20 claims of expired keys '1', '11', … '191' of the seeded expiredCompleted rows. */
      const claimsOfExpiredKeys = (privateStore: IdempotencyStore<TTx>) =>
        Array.from({ length: 20 }, (_, i) =>
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

      it('rejects a table name that is not an identifier', () => {
        expect(() => backend.createStore({ table: 'keys; drop table x' })).toThrow(/Invalid table/);
        // Control: the valid names are accepted.
        for (const table of backend.validTableNames)
          expect(() => backend.createStore({ table })).not.toThrow();
      });

      it('deletes exactly the expired rows without a live lease, in batches', async () => {
        await withKeyTable(backend, async (table) => {
          const privateStore = backend.createStore({ table });
          await seed(table, 'expiredCompleted', 15);
          await seed(table, 'expiredDeadLease', 5);
          await seed(table, 'expiredLiveLease', 4);
          await seed(table, 'liveCompleted', 6);
          await seed(table, 'liveProcessing', 3);

          expect(await privateStore.deleteExpiredBatch(7)).toBe(7);
          expect(await cleanupExpiredKeys(privateStore, { batchSize: 6 })).toEqual({
            deleted: 13,
            batches: 3,
          });
          expect(await backend.countsByProcedure(table)).toEqual({
            expiredLiveLease: 4,
            liveCompleted: 6,
            liveProcessing: 3,
          });
          // Nothing left to delete: one empty batch.
          expect(await cleanupExpiredKeys(privateStore, { batchSize: 6 })).toEqual({
            deleted: 0,
            batches: 1,
          });
          // The private table's store reads the private table.
          expect(
            await privateStore.find({ scope: 'cleanup', procedure: 'liveCompleted', key: '1' }),
          ).toMatchObject({ state: 'completed' });
        });
      });

      it('an exact multiple of the batch size ends with one empty batch; maxBatches bounds the work', async () => {
        await withKeyTable(backend, async (table) => {
          const privateStore = backend.createStore({ table });
          await seed(table, 'expiredCompleted', 20);
          expect(await cleanupExpiredKeys(privateStore, { batchSize: 5, maxBatches: 2 })).toEqual({
            deleted: 10,
            batches: 2,
          });
          expect(await cleanupExpiredKeys(privateStore, { batchSize: 5 })).toEqual({
            deleted: 10,
            batches: 3,
          });
          expect(await backend.countsByProcedure(table)).toEqual({});
        });
      });

      it('three concurrent cleanups split the work: together they delete every expired row once', async () => {
        await withKeyTable(backend, async (table) => {
          const privateStore = backend.createStore({ table });
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
          expect(await backend.countsByProcedure(table)).toEqual({ expiredLiveLease: 50, liveCompleted: 50 });
        });
      });

      it('concurrent cleanups and claims of the same expired keys: every expired row deleted once, every claim owns its key', async () => {
        await withKeyTable(backend, async (table) => {
          const privateStore = backend.createStore({ table });
          await seed(table, 'expiredCompleted', 1_500);
          await seed(table, 'expiredLiveLease', 50);
          await seed(table, 'liveCompleted', 50);
          // The claims are sent first, then the cleanups: each key's claim races the batch that holds its row.
          const claims = claimsOfExpiredKeys(privateStore);
          const [a, b, c, ...claimed] = await Promise.all([
            cleanupExpiredKeys(privateStore, { batchSize: 100 }),
            cleanupExpiredKeys(privateStore, { batchSize: 100 }),
            cleanupExpiredKeys(privateStore, { batchSize: 100 }),
            ...claims,
          ]);
          // Every claim owns its key, whether it took over the expired row or inserted after cleanup deleted it.
          expect(claimed.every((result) => result.claimed)).toBe(true);
          const deleted = [a, b, c].reduce((sum, result) => sum + (result?.deleted ?? 0), 0);
          expect(deleted).toBeGreaterThanOrEqual(1_480);
          expect(deleted).toBeLessThanOrEqual(1_500);
          expect(await backend.countsByProcedure(table)).toEqual({
            expiredCompleted: 20,
            expiredLiveLease: 50,
            liveCompleted: 50,
          });
        });
      });
    });
  });
}
