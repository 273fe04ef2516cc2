/**
 * External mode's lease on the real Postgres store: the owner renews it while a procedure runs longer than the
 * lease, a run that lost its lease to a takeover answers 409 whatever it ends with, and a duplicate waiting on
 * the key comes back as soon as the key completes. Leases here are fractions of a second; every wait is on an
 * event (the database's clock passing a moment, a call observed), never on a duration.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import { handleExternal } from '../src/core/external.ts';
import type { IdempotentRequest } from '../src/core/request.ts';
import {
  fingerprintRequest,
  IdempotencyErrorCode,
  type IdempotencyStore,
  type RecordKey,
  type StoredResponse,
} from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, deferred, uniqueScope, waitUntil } from './support/db.ts';
import { caught } from './support/promises.ts';

let db: Database;
let store: ReturnType<typeof createPrismaIdempotencyStore<Database>>;
let storeWithoutRenewal: ReturnType<typeof createPrismaIdempotencyStore<Database>>;
beforeAll(async () => {
  db = await connectWithOwnTable();
  store = createPrismaIdempotencyStore(db);
  storeWithoutRenewal = createPrismaIdempotencyStore(db, { leaseRenewal: false });
});
afterAll(async () => {
  await db.$disconnect();
});

const output = (body: string): StoredResponse => ({ kind: 'output', httpStatus: 200, body });

function newRequest(): IdempotentRequest {
  return {
    scope: uniqueScope(),
    procedure: 'lease.op',
    key: randomUUID(),
    fingerprint: fingerprintRequest('lease.op', { n: 1 }),
  };
}

/**
 * True once the database's clock is past the end of the key's FIRST lease: the claim wrote `created_at` and
 * `locked_until = created_at + lease` in one statement, so this holds whether or not the lease was renewed since.
 */
async function firstLeaseOver(key: RecordKey, leaseSeconds: number): Promise<boolean> {
  const rows = await db.$queryRawUnsafe<Array<{ over: boolean }>>(
    `select now() > created_at + make_interval(secs => $4::double precision) as over
     from idempotency_keys where scope = $1 and procedure = $2 and key = $3`,
    key.scope,
    key.procedure,
    key.key,
    leaseSeconds,
  );
  return rows[0]?.over === true;
}

/** Resolves once the database's clock has moved `seconds` past its reading at the call. */
async function databaseClockAdvances(seconds: number): Promise<void> {
  const [start] = await db.$queryRawUnsafe<Array<{ at: Date }>>('select now() as at');
  await waitUntil(async () => {
    const [row] = await db.$queryRawUnsafe<Array<{ past: boolean }>>(
      'select now() > $1::timestamptz + make_interval(secs => $2::double precision) as past',
      start?.at,
      seconds,
    );
    return row?.past === true;
  });
}

describe('lease renewal', () => {
  // Renewed every second: only a renewal stalled 2 s by a loaded machine could let the lease end.
  const leaseSeconds = 3;
  const options = resolveOptions({ leaseSeconds });

  /** The first run stays in its procedure past its first lease, then a duplicate arrives; what happens to it? */
  async function duplicateAfterFirstLease(subject: IdempotencyStore<unknown>) {
    const request = newRequest();
    let runs = 0;
    const run = async () => {
      runs += 1;
      return { result: `run ${runs}`, response: output(`"run ${runs}"`) };
    };
    let duplicate: unknown;
    const first = await handleExternal(subject, options, request, async () => {
      await waitUntil(() => firstLeaseOver(request, leaseSeconds));
      duplicate = await handleExternal(subject, options, request, run).catch((error: unknown) => error);
      return run();
    }).catch((error: unknown) => error);
    return { first, duplicate, runs, record: await subject.find(request) };
  }

  it('a procedure that outlives its lease keeps its key: the duplicate gets 409, the procedure runs once', async () => {
    const { first, duplicate, runs, record } = await duplicateAfterFirstLease(store);
    expect(duplicate).toMatchObject({ code: IdempotencyErrorCode.inProgress, httpStatus: 409 });
    expect(first).toEqual({ kind: 'executed', result: 'run 1' });
    expect(runs).toBe(1);
    expect(record).toMatchObject({ state: 'completed', response: output('"run 1"') });
  });

  it('control: without renewal the duplicate takes the key over and runs the procedure a second time', async () => {
    const { first, duplicate, runs, record } = await duplicateAfterFirstLease(storeWithoutRenewal);
    expect(duplicate).toEqual({ kind: 'executed', result: 'run 1' });
    expect(runs).toBe(2);
    // The first run is fenced out: its completion stores nothing and it answers 409.
    expect(first).toMatchObject({ code: IdempotencyErrorCode.leaseLost, httpStatus: 409 });
    expect(record).toMatchObject({ state: 'completed', response: output('"run 1"') });
  });

  it('stops renewing once the lease is no longer held (another owner took the key)', async () => {
    const request = newRequest();
    const renewals: boolean[] = [];
    const observed: IdempotencyStore<unknown> = {
      ...store,
      renewLease: async (key, owner, seconds) => {
        const held = await store.renewLease?.(key, owner, seconds);
        renewals.push(held === true);
        return held === true;
      },
    };
    let seenAtLoss = -1;
    let seenLater = -2;
    const outcome = await handleExternal(observed, options, request, async () => {
      await waitUntil(() => renewals.length > 0);
      // Another owner takes the key: the next renewal finds it not held, and none follows.
      await db.$executeRawUnsafe(
        `update idempotency_keys set lease_owner = $4::uuid
         where scope = $1 and procedure = $2 and key = $3`,
        request.scope,
        request.procedure,
        request.key,
        randomUUID(),
      );
      await waitUntil(() => renewals.includes(false));
      seenAtLoss = renewals.length;
      // Two renewal periods later: a timer still running would have renewed (and failed) again.
      await databaseClockAdvances((2 * leaseSeconds) / 3);
      seenLater = renewals.length;
      return { result: 'done', response: output('"done"') };
    }).catch((error: unknown) => error);
    expect(seenLater).toBe(seenAtLoss);
    expect(renewals.filter((held) => !held)).toHaveLength(1);
    // Its completion is fenced: the key is another owner's now.
    expect(outcome).toMatchObject({ code: IdempotencyErrorCode.leaseLost });
  });
});

describe('renewal ends with the run', () => {
  it.each([
    ['completes', async () => ({ result: 'done', response: output('"done"') })],
    [
      'throws',
      async () => {
        throw new Error('adapter bug');
      },
    ],
  ])('no renewal is sent after a run that %s', async (_how, body) => {
    const leaseSeconds = 0.3;
    const request = newRequest();
    let renewals = 0;
    const observed: IdempotencyStore<unknown> = {
      ...store,
      renewLease: async (key, owner, seconds) => {
        renewals += 1;
        return (await store.renewLease?.(key, owner, seconds)) === true;
      },
    };
    await handleExternal(observed, resolveOptions({ leaseSeconds }), request, async () => {
      await waitUntil(() => renewals > 0);
      return body();
    }).catch(() => null);
    const afterRun = renewals;
    // Several renewal periods (0.1 s each) later, a timer left running would have sent more.
    await databaseClockAdvances(0.5);
    expect(renewals).toBe(afterRun);
  });
});

describe('a waiting duplicate whose owner dies', () => {
  it("takes the key over as soon as the owner's lease ends, and runs the procedure itself", async () => {
    const options = resolveOptions({ leaseSeconds: 0.2, waitForInFlightMs: 120_000 });
    const request = newRequest();
    const resume = deferred();
    // The first owner freezes (no renewal, as if SIGSTOPped) and only resumes after the takeover.
    const first = handleExternal(storeWithoutRenewal, options, request, async () => {
      await resume.promise;
      return { result: 'first', response: output('"first"') };
    }).catch((error: unknown) => error);
    await waitUntil(async () => (await store.find(request)) !== null);
    const duplicate = await handleExternal(storeWithoutRenewal, options, request, async () => ({
      result: 'duplicate',
      response: output('"duplicate"'),
    }));
    resume.resolve();
    expect(duplicate).toEqual({ kind: 'executed', result: 'duplicate' });
    expect(await first).toMatchObject({ code: IdempotencyErrorCode.leaseLost });
    expect(await store.find(request)).toMatchObject({ state: 'completed', response: output('"duplicate"') });
  });
});

/** Ends the key's lease now, as the database's clock passing `locked_until` would (the owner stays frozen). */
async function endLease(key: RecordKey): Promise<void> {
  await db.$executeRawUnsafe(
    `update idempotency_keys set locked_until = now() - interval '1 second'
     where scope = $1 and procedure = $2 and key = $3`,
    key.scope,
    key.procedure,
    key.key,
  );
}

describe('a waiting duplicate facing a dead lease', () => {
  // A lease far longer than the test: it ends only when the test ends it.
  const options = resolveOptions({ leaseSeconds: 60, waitForInFlightMs: 120_000 });

  /** A first owner that claims the key and freezes until `resume`; resolves once its claim is committed. */
  async function frozenOwner(
    request: IdempotentRequest,
    resume: Promise<void>,
  ): Promise<{ first: Promise<unknown> }> {
    const first = handleExternal(storeWithoutRenewal, options, request, async () => {
      await resume;
      return { result: 'first', response: output('"first"') };
    }).catch((error: unknown) => error);
    await waitUntil(async () => (await store.find(request)) !== null);
    return { first };
  }

  it('takes the key over once the lease has ended while it waited, and runs the procedure itself', async () => {
    // As "a waiting duplicate whose owner dies" above, with the lease ended by the test: the duplicate's first
    // claim surely meets a live lease, however slow the machine, so the takeover is the claim sent after waiting.
    const request = newRequest();
    const resume = deferred();
    const { first } = await frozenOwner(request, resume.promise);
    const reads: string[] = [];
    let claims = 0;
    const observed: IdempotencyStore<unknown> = {
      ...storeWithoutRenewal,
      find: async (key) => {
        const record = await storeWithoutRenewal.find(key);
        reads.push(record?.leaseActive ? 'live' : 'dead');
        return record;
      },
      claim: (claimRequest, tx) => {
        claims += 1;
        return storeWithoutRenewal.claim(claimRequest, tx as never);
      },
    };
    const duplicate = handleExternal(observed, options, request, async () => ({
      result: 'duplicate',
      response: output('"duplicate"'),
    }));
    await waitUntil(() => reads.includes('live'));
    await endLease(request);
    expect(await duplicate).toEqual({ kind: 'executed', result: 'duplicate' });
    expect(claims).toBe(2);
    resume.resolve();
    expect(await first).toMatchObject({ code: IdempotencyErrorCode.leaseLost });
    expect(await store.find(request)).toMatchObject({ state: 'completed', response: output('"duplicate"') });
  });

  it("whose takeover loses to another retry gets that retry's stored response", async () => {
    const request = newRequest();
    const resume = deferred();
    const { first } = await frozenOwner(request, resume.promise);
    const reads: string[] = [];
    let claims = 0;
    let retry: unknown;
    const racing: IdempotencyStore<unknown> = {
      ...storeWithoutRenewal,
      find: async (key) => {
        const record = await storeWithoutRenewal.find(key);
        reads.push(record?.leaseActive ? 'live' : 'dead');
        return record;
      },
      // Just before the duplicate's takeover claim, another retry takes the dead lease over and completes.
      claim: async (claimRequest, tx) => {
        claims += 1;
        if (claims === 2)
          retry = await handleExternal(storeWithoutRenewal, options, request, async () => ({
            result: 'retry',
            response: output('"retry"'),
          }));
        return storeWithoutRenewal.claim(claimRequest, tx as never);
      },
    };
    const duplicate = handleExternal(racing, options, request, async () => {
      throw new Error('a duplicate whose takeover lost must not run the procedure');
    });
    await waitUntil(() => reads.includes('live'));
    await endLease(request);
    expect(await duplicate).toEqual({ kind: 'replayed', response: output('"retry"') });
    expect(claims).toBe(2);
    expect(retry).toEqual({ kind: 'executed', result: 'retry' });
    resume.resolve();
    expect(await first).toMatchObject({ code: IdempotencyErrorCode.leaseLost });
    expect(await store.find(request)).toMatchObject({ state: 'completed', response: output('"retry"') });
  });

  it("with another request's fingerprint gets 422 from its one claim, and tries no takeover", async () => {
    const request = newRequest();
    const resume = deferred();
    const { first } = await frozenOwner(request, resume.promise);
    await endLease(request);
    let claims = 0;
    const counted: IdempotencyStore<unknown> = {
      ...storeWithoutRenewal,
      claim: (claimRequest, tx) => {
        claims += 1;
        return storeWithoutRenewal.claim(claimRequest, tx as never);
      },
    };
    const other = { ...request, fingerprint: fingerprintRequest('lease.op', { n: 2 }) };
    const error = await caught(
      handleExternal(counted, options, other, async () => {
        throw new Error("another request's body must not run on this key");
      }),
    );
    expect(error).toMatchObject({ code: IdempotencyErrorCode.keyReused });
    expect(claims).toBe(1);
    // The dead lease is left for a retry of the same request.
    expect(await store.find(request)).toMatchObject({
      state: 'processing',
      fingerprint: request.fingerprint,
    });
    resume.resolve();
    await first;
  });
});

describe('a run that lost its lease (a zombie)', () => {
  const leaseSeconds = 0.2;
  const options = resolveOptions({ leaseSeconds });

  /** The first run freezes past its lease, a takeover completes the key, then the first run fails late. */
  async function lateFailureAfterTakeover(subject: IdempotencyStore<unknown>) {
    const request = newRequest();
    let takeover: unknown;
    const zombie = await caught(
      handleExternal(subject, options, request, async () => {
        await waitUntil(() => firstLeaseOver(request, leaseSeconds));
        takeover = await handleExternal(subject, options, request, async () => ({
          result: 'takeover',
          response: output('"takeover"'),
        }));
        throw new Error('the frozen first run fails on the overlap');
      }),
    );
    return { zombie, takeover, record: await store.find(request) };
  }

  it("answers 409 for its late error, and the takeover's stored result stays", async () => {
    const { zombie, takeover, record } = await lateFailureAfterTakeover(storeWithoutRenewal);
    expect(takeover).toEqual({ kind: 'executed', result: 'takeover' });
    expect(zombie).toMatchObject({ code: IdempotencyErrorCode.leaseLost, httpStatus: 409 });
    expect(record).toMatchObject({ state: 'completed', response: output('"takeover"') });
  });

  it('answers 409 for a late non-storable outcome too', async () => {
    const request = newRequest();
    const zombie = await caught(
      handleExternal(storeWithoutRenewal, options, request, async () => {
        await waitUntil(() => firstLeaseOver(request, leaseSeconds));
        await handleExternal(storeWithoutRenewal, options, request, async () => ({
          result: 'takeover',
          response: output('"takeover"'),
        }));
        return { result: 'transient failure', response: null };
      }),
    );
    expect(zombie).toMatchObject({ code: IdempotencyErrorCode.leaseLost, httpStatus: 409 });
    expect(await store.find(request)).toMatchObject({ state: 'completed' });
  });

  it("control: a release not fenced by its owner deletes the takeover's result and answers the zombie's own error", async () => {
    const unfenced: IdempotencyStore<unknown> = {
      ...storeWithoutRenewal,
      release: async (key) =>
        (await db.$executeRawUnsafe(
          'delete from idempotency_keys where scope = $1 and procedure = $2 and key = $3',
          key.scope,
          key.procedure,
          key.key,
        )) === 1,
    };
    const { zombie, takeover, record } = await lateFailureAfterTakeover(unfenced);
    expect(takeover).toEqual({ kind: 'executed', result: 'takeover' });
    expect(zombie).toMatchObject({ message: 'the frozen first run fails on the overlap' });
    expect(record).toBeNull();
  });
});

describe('a duplicate waiting on the key (waitForInFlightMs)', () => {
  it("returns the first request's response as soon as it completes, not at its deadline", async () => {
    // A deadline longer than the test's own timeout: waiting it out would fail the test.
    const options = resolveOptions({ waitForInFlightMs: 120_000 });
    const request = newRequest();
    const reads: string[] = [];
    const observed: IdempotencyStore<unknown> = {
      ...store,
      find: async (key) => {
        const record = await store.find(key);
        reads.push(record?.state ?? 'none');
        return record;
      },
    };
    const finish = deferred();
    const first = handleExternal(store, options, request, async () => {
      await finish.promise;
      return { result: 'first', response: output('"first"') };
    });
    await waitUntil(async () => (await store.find(request)) !== null);
    let duplicateRuns = 0;
    const duplicate = handleExternal(observed, options, request, async () => {
      duplicateRuns += 1;
      return { result: 'duplicate', response: output('"duplicate"') };
    });
    await waitUntil(() => reads.includes('processing'));
    finish.resolve();
    expect(await first).toEqual({ kind: 'executed', result: 'first' });
    expect(await duplicate).toEqual({ kind: 'replayed', response: output('"first"') });
    expect(duplicateRuns).toBe(0);
    // It polled while the key was processing and stopped at the first read that saw it completed.
    expect(reads.filter((state) => state === 'completed')).toHaveLength(1);
    expect(reads.at(-1)).toBe('completed');
  });
});
