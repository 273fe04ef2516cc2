/**
 * The storage contract. The guarantee rests on the store's unique index on (scope, procedure, key): the
 * decision "this request owns the key" must be the engine's own atomic insert on that index (Postgres and
 * SQLite: INSERT … ON CONFLICT DO NOTHING; MariaDB: INSERT IGNORE), never a read followed by a write. What a
 * store does after a failed insert (read the live record, take over an expired one with a guarded UPDATE)
 * decides nothing the index has not already decided.
 */
import type { IdempotencyRecord, RecordKey, StoredResponse } from './record.ts';

export interface ClaimRequest extends RecordKey {
  fingerprint: string;
  /** A fresh random token: the lease owner, used to fence completion and release. */
  owner: string;
  leaseSeconds: number;
  retentionSeconds: number;
  /**
   * Per-principal cap: when `scope` already has `max` keys `processing` under a live lease, a claim of a NEW key
   * (no row yet, or an expired one) throws `tooManyInFlightError` (429) and stores nothing. A duplicate of a key
   * that exists, and the takeover of an expired lease by the same request, are not new and are not counted.
   * Absent (or `max` = Infinity): no cap.
   */
  inFlightCap?: { max: number; retryAfterSeconds: number } | undefined;
  /**
   * Record the key as already completed with this response (no lease): how transactional mode stores a
   * business error after rolling back the procedure's writes. Same rules otherwise: a live row is returned,
   * not overwritten.
   */
  response?: StoredResponse | undefined;
}

export type ClaimResult =
  /** This request owns the key now; `takeover` when it replaced an expired key or an expired lease. */
  | { claimed: true; takeover: boolean }
  /** Someone else holds the key: what they left. */
  | { claimed: false; record: IdempotencyRecord };

export interface TransactionOptions {
  /** Bound on waiting for a row lock (a concurrent duplicate's uncommitted claim). */
  lockTimeoutMs: number;
  timeoutMs: number;
}

export interface IdempotencyStore<TTx> {
  /**
   * Atomically claims the key (or takes over an expired one), inside `tx` when given. When the key is held
   * (live), returns the record instead; the Postgres store does both in one statement and takes no row lock
   * to read a live record, so a replay costs one read.
   */
  claim(request: ClaimRequest, tx?: TTx): Promise<ClaimResult>;
  /** Stores the response if `owner` still holds the key; false when the lease was taken over (fenced). */
  complete(key: RecordKey, owner: string, response: StoredResponse, tx?: TTx): Promise<boolean>;
  /**
   * Optional, external mode: extends `owner`'s live lease to now + `leaseSeconds` while its procedure runs;
   * false when `owner` no longer holds the key (taken over, completed or released). With it, only an owner that
   * died (or froze past a whole lease) loses its key; without it, a procedure slower than the lease is taken over
   * while still running and the two executions overlap.
   */
  renewLease?(key: RecordKey, owner: string, leaseSeconds: number): Promise<boolean>;
  /** Deletes the claim if `owner` still holds it, so a retry runs again. */
  release(key: RecordKey, owner: string): Promise<boolean>;
  /** Re-reads a record (used while waiting for an in-flight duplicate). */
  find(key: RecordKey): Promise<IdempotencyRecord | null>;
  /**
   * Adds `replays` (1 or more) to the key's replay count. Statistics only: the handler does not wait for it, a
   * failure is ignored, and it sends at most one of these per key at a time (core/replay-counts.ts), so
   * `replays` is how many replays of the key arrived since the last one was sent.
   */
  countReplay(key: RecordKey, replays: number): Promise<void>;
  /**
   * True when a duplicate may be answered as soon as its claim returns, before its transaction ends: a claim
   * that finds the key held writes nothing, and no statement outside that transaction can end up inside it.
   * Postgres and MariaDB (a connection per transaction): true. Not SQLite, whose one connection runs a
   * statement sent outside any transaction inside whichever transaction is open: the caller's next write,
   * sent after the answer, could join the duplicate's transaction and be rolled back with it. Absent: false.
   */
  readonly answersDuplicatesAtClaim?: boolean;
  /**
   * Optional: rejects when `tx`'s transaction can no longer commit — on Postgres a statement of it failed (its
   * error caught by the procedure), so its COMMIT would roll everything back and report no error. Sent before the
   * COMMIT of a transaction whose last statements were the procedure's, not the store's (a claim written
   * completed, then the run). Absent when the store's own COMMIT reports it, or no statement error can end a
   * transaction silently.
   */
  checkTransaction?(tx: TTx): Promise<void>;
  /** Runs `fn` in one transaction whose lock waits are bounded. */
  transaction<T>(fn: (tx: TTx) => Promise<T>, options: TransactionOptions): Promise<T>;
  /** True when `error` is the database giving up on a lock wait (→ 409, not 500). */
  isLockTimeout(error: unknown): boolean;
  /** Deletes up to `batchSize` expired keys whose lease is not live; returns how many. */
  deleteExpiredBatch(batchSize: number): Promise<number>;
}
