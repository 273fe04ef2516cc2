/**
 * The claim rules the MariaDB and SQLite stores share (stores/claim-flow.ts), decision by decision, on scripted
 * statement results: which statement runs next and what the claim answers. What each statement does on a real
 * database (and that the rules hold under concurrency) is in the stores' own suites (mariadb-*.test.ts,
 * sqlite-*.test.ts, the conformance kit); here every branch is reached on purpose, including the ones a race
 * reaches only rarely (a row deleted between two statements).
 */
import { describe, expect, it } from 'vitest';
import type { ClaimRequest } from '../src/core/store.ts';
import { IdempotencyError, IdempotencyErrorCode, type IdempotencyRecord } from '../src/index.ts';
import {
  type ClaimedRow,
  type ClaimStatements,
  claimThrough,
  inFlightCapOf,
} from '../src/stores/claim-flow.ts';

const request: ClaimRequest = {
  scope: 's',
  procedure: 'p',
  key: 'k',
  fingerprint: 'f',
  owner: 'o',
  leaseSeconds: 30,
  retentionSeconds: 60,
};
const capped: ClaimRequest = { ...request, inFlightCap: { max: 2, retryAfterSeconds: 3 } };

const record = (replayCount: number): IdempotencyRecord => ({
  scope: 's',
  procedure: 'p',
  key: 'k',
  fingerprint: 'f',
  state: 'completed',
  response: { kind: 'output', httpStatus: 200, body: 'b' },
  leaseOwner: null,
  leaseActive: false,
  createdAt: new Date(0),
  expiresAt: new Date(60_000),
  replayCount,
});
const live = (replayCount = 0): ClaimedRow => ({
  record: record(replayCount),
  expired: false,
  deadLeaseSameRequest: false,
});
const expired: ClaimedRow = { ...live(), expired: true };
const deadLease: ClaimedRow = { ...live(), deadLeaseSameRequest: true };

/**
 * Statements that answer from scripts, one answer per call in order, and log each call: `insert`, `read`,
 * `takeOver(true|false)`, `count`.
 */
function scripted(script: {
  cap?: 'inside' | { inFlight: number };
  inserts?: boolean[];
  reads?: Array<ClaimedRow | null>;
  takeOvers?: boolean[];
}) {
  const calls: string[] = [];
  const next = <T>(list: T[] | undefined, what: string): T => {
    const value = list?.shift();
    if (value === undefined) throw new Error(`unscripted ${what}`);
    return value;
  };
  const counting = script.cap && script.cap !== 'inside' ? script.cap.inFlight : undefined;
  const statements: ClaimStatements = {
    cap:
      counting === undefined
        ? { counted: 'inside' }
        : {
            counted: 'before',
            countInFlight: async (max) => {
              calls.push(`count(${max})`);
              return counting;
            },
          },
    insert: async () => {
      calls.push('insert');
      return next(script.inserts, 'insert');
    },
    read: async () => {
      calls.push('read');
      return next(script.reads, 'read');
    },
    takeOver: async (expiredToo) => {
      calls.push(`takeOver(${expiredToo})`);
      return next(script.takeOvers, 'takeOver');
    },
  };
  return { statements, calls };
}

async function tooMany(claim: Promise<unknown>): Promise<IdempotencyError> {
  const error = await claim.then(
    () => null,
    (caught: unknown) => caught,
  );
  if (!(error instanceof IdempotencyError))
    throw new Error(`expected an IdempotencyError, got ${String(error)}`);
  expect(error.code).toBe(IdempotencyErrorCode.tooManyInFlight);
  return error;
}

describe('claimThrough', () => {
  it('a row inserted is a claim; nothing is read', async () => {
    const { statements, calls } = scripted({ inserts: [true] });
    expect(await claimThrough(statements, request)).toEqual({ claimed: true, takeover: false });
    expect(calls).toEqual(['insert']);
  });

  it('a live row is held: its record, no takeover attempted', async () => {
    const { statements, calls } = scripted({ inserts: [false], reads: [live(4)] });
    expect(await claimThrough(statements, request)).toEqual({ claimed: false, record: record(4) });
    expect(calls).toEqual(['insert', 'read']);
  });

  it('an expired row, or a dead lease of this request, is taken over by the guarded update', async () => {
    for (const row of [expired, deadLease]) {
      const { statements, calls } = scripted({ inserts: [false], reads: [row], takeOvers: [true] });
      expect(await claimThrough(statements, request)).toEqual({ claimed: true, takeover: true });
      expect(calls).toEqual(['insert', 'read', 'takeOver(true)']);
    }
  });

  it('a takeover that lost to another writer answers what that writer left, read again', async () => {
    const { statements, calls } = scripted({
      inserts: [false],
      reads: [expired, live(7)],
      takeOvers: [false],
    });
    expect(await claimThrough(statements, request)).toEqual({ claimed: false, record: record(7) });
    expect(calls).toEqual(['insert', 'read', 'takeOver(true)', 'read']);
  });

  it('a row gone between two statements (a cleanup, a release) starts the claim again', async () => {
    const afterInsert = scripted({ inserts: [false, true], reads: [null] });
    expect(await claimThrough(afterInsert.statements, request)).toEqual({ claimed: true, takeover: false });
    expect(afterInsert.calls).toEqual(['insert', 'read', 'insert']);
    const afterTakeover = scripted({ inserts: [false, true], reads: [expired, null], takeOvers: [false] });
    expect(await claimThrough(afterTakeover.statements, request)).toEqual({ claimed: true, takeover: false });
    expect(afterTakeover.calls).toEqual(['insert', 'read', 'takeOver(true)', 'read', 'insert']);
  });

  describe('the cap counted before the insert (MariaDB)', () => {
    it('under the cap: counted, then claimed as usual', async () => {
      const { statements, calls } = scripted({ cap: { inFlight: 1 }, inserts: [true] });
      expect(await claimThrough(statements, capped)).toEqual({ claimed: true, takeover: false });
      expect(calls).toEqual(['count(2)', 'insert']);
    });

    it('at the cap: no insert; a new key is refused with the cap and its Retry-After', async () => {
      const { statements, calls } = scripted({ cap: { inFlight: 2 }, reads: [null] });
      const error = await tooMany(claimThrough(statements, capped));
      expect(error.retryAfterSeconds).toBe(3);
      expect(calls).toEqual(['count(2)', 'read']);
    });

    it('at the cap: an existing live key is still answered (a duplicate is not new)', async () => {
      const { statements } = scripted({ cap: { inFlight: 2 }, reads: [live(1)] });
      expect(await claimThrough(statements, capped)).toEqual({ claimed: false, record: record(1) });
    });

    it('at the cap: an expired key is a new one, refused; a dead lease of this request is resumed', async () => {
      const reuse = scripted({ cap: { inFlight: 2 }, reads: [expired] });
      await tooMany(claimThrough(reuse.statements, capped));
      expect(reuse.calls).toEqual(['count(2)', 'read']);
      const resume = scripted({ cap: { inFlight: 2 }, reads: [deadLease], takeOvers: [true] });
      expect(await claimThrough(resume.statements, capped)).toEqual({ claimed: true, takeover: true });
      expect(resume.calls).toEqual(['count(2)', 'read', 'takeOver(false)']);
    });

    it('under the cap, a row gone or a takeover lost is what it is without a cap: claim again, or read again', async () => {
      const gone = scripted({ cap: { inFlight: 1 }, inserts: [false, true], reads: [null] });
      expect(await claimThrough(gone.statements, capped)).toEqual({ claimed: true, takeover: false });
      expect(gone.calls).toEqual(['count(2)', 'insert', 'read', 'count(2)', 'insert']);
      const lost = scripted({
        cap: { inFlight: 1 },
        inserts: [false],
        reads: [expired, live(5)],
        takeOvers: [false],
      });
      expect(await claimThrough(lost.statements, capped)).toEqual({ claimed: false, record: record(5) });
      expect(lost.calls).toEqual(['count(2)', 'insert', 'read', 'takeOver(true)', 'read']);
    });

    it('no cap, or an infinite one: nothing counted', async () => {
      const infinite = { ...request, inFlightCap: { max: Number.POSITIVE_INFINITY, retryAfterSeconds: 1 } };
      expect(inFlightCapOf(infinite)).toBeNull();
      const { statements, calls } = scripted({ cap: { inFlight: 99 }, inserts: [true] });
      await claimThrough(statements, infinite);
      expect(calls).toEqual(['insert']);
    });
  });

  describe('the cap counted inside the statements (SQLite)', () => {
    it('an insert the cap refused leaves no row: 429', async () => {
      const { statements, calls } = scripted({ cap: 'inside', inserts: [false], reads: [null] });
      await tooMany(claimThrough(statements, capped));
      expect(calls).toEqual(['insert', 'read']);
    });

    it('an expired key whose takeover the cap refused: 429; a live row: held', async () => {
      const refused = scripted({ cap: 'inside', inserts: [false], reads: [expired], takeOvers: [false] });
      await tooMany(claimThrough(refused.statements, capped));
      expect(refused.calls).toEqual(['insert', 'read', 'takeOver(true)']);
      const held = scripted({ cap: 'inside', inserts: [false], reads: [live(2)] });
      expect(await claimThrough(held.statements, capped)).toEqual({ claimed: false, record: record(2) });
    });

    it('without a cap, a row gone after the insert is claimed again, not refused', async () => {
      const { statements } = scripted({ cap: 'inside', inserts: [false, true], reads: [null] });
      expect(await claimThrough(statements, request)).toEqual({ claimed: true, takeover: false });
    });
  });
});
