/**
 * The claim's rules, written once for the stores whose claim takes several statements (MariaDB, SQLite; the
 * Postgres store claims and reads in one). Each dialect gives its statements; this decides from what they
 * return, and decides nothing the unique index has not: a first claim is the dialect's INSERT that ignores a
 * conflict on the primary key, and a takeover is an UPDATE that re-checks the takeover rule on the row itself.
 */
import { tooManyInFlightError } from '../core/errors.ts';
import type { IdempotencyRecord } from '../core/record.ts';
import type { ClaimRequest, ClaimResult } from '../core/store.ts';

/** The claim's per-principal cap, when it has one that can be reached. */
export type InFlightCap = NonNullable<ClaimRequest['inFlightCap']>;

/** The key's row as a claim reads it, with the takeover rule evaluated on it by the database. */
export interface ClaimedRow {
  record: IdempotencyRecord;
  /** Past its retention and not running: a new request may take the key over. */
  expired: boolean;
  /** Its lease ended while processing this very request (same fingerprint): its owner died, a retry resumes it. */
  deadLeaseSameRequest: boolean;
}

/** One dialect's statements for one claim (the request and transaction are bound in). */
export interface ClaimStatements {
  /**
   * Where the cap is counted: `'before'` — a read before the insert (`countInFlight`), which can overshoot by the
   * claims counting at the same instant; `'inside'` — inside the insert and the takeover themselves, exact under
   * the database's one writer.
   */
  cap: { counted: 'before'; countInFlight(max: number): Promise<number> } | { counted: 'inside' };
  /** INSERT of the claimed row, ignoring a conflict on the primary key; true when it inserted. */
  insert(): Promise<boolean>;
  /** The key's row as it is now, or null. */
  read(): Promise<ClaimedRow | null>;
  /** The guarded takeover UPDATE; `expiredToo` false: a dead lease of the same request only. True when it took. */
  takeOver(expiredToo: boolean): Promise<boolean>;
}

/** The request's cap, or null when it has none or an infinite one. */
export function inFlightCapOf(request: ClaimRequest): InFlightCap | null {
  return request.inFlightCap && Number.isFinite(request.inFlightCap.max) ? request.inFlightCap : null;
}

/**
 * Claims the key through `statements`: inserted → claimed; else the row decides — live → held (a replay, a 409
 * or a 422 for the handler); expired or a dead lease of this request → the takeover; a new key over the cap →
 * 429. A row that is gone between two statements (a cleanup, a release) starts the claim again.
 */
export async function claimThrough(statements: ClaimStatements, request: ClaimRequest): Promise<ClaimResult> {
  const cap = inFlightCapOf(request);
  const { cap: capRule } = statements;
  const atCap =
    cap && capRule.counted === 'before' ? (await capRule.countInFlight(cap.max)) >= cap.max : false;
  if (!atCap && (await statements.insert())) return { claimed: true, takeover: false };

  const row = await statements.read();
  // No row: a new key the cap refused, or one deleted since the insert.
  if (!row) {
    if (cap && (atCap || capRule.counted === 'inside'))
      throw tooManyInFlightError(cap.max, cap.retryAfterSeconds);
    return claimThrough(statements, request);
  }
  if (!row.expired && !row.deadLeaseSameRequest) return { claimed: false, record: row.record };
  // A new request reusing an expired key counts against the cap; the same request resuming its own key does not.
  if (cap && atCap && row.expired) throw tooManyInFlightError(cap.max, cap.retryAfterSeconds);
  if (await statements.takeOver(!atCap)) return { claimed: true, takeover: true };
  if (cap && capRule.counted === 'inside' && row.expired)
    throw tooManyInFlightError(cap.max, cap.retryAfterSeconds);

  // Someone else took it over (or completed it) first: what they left.
  const now = await statements.read();
  return now ? { claimed: false, record: now.record } : claimThrough(statements, request);
}
