/**
 * Per-procedure options. Every option has a documented default; `resolveOptions` applies them.
 */
import type { ReplayCache } from './replay-cache.ts';

export const IdempotencyMode = {
  /**
   * The claim, the procedure's database writes and the stored result commit in ONE transaction, which the
   * procedure receives as `ctx.idempotency.tx`. A concurrent duplicate waits on the unique index (bounded by
   * `lockTimeoutMs`) and then replays. Use it when every effect is in this database.
   */
  transactional: 'transactional',
  /**
   * For effects outside the database (a payment provider): the claim commits first under a lease, the
   * procedure runs (forwarding the key to the provider), and completion is fenced by the lease owner.
   */
  external: 'external',
} as const;
export type IdempotencyMode = (typeof IdempotencyMode)[keyof typeof IdempotencyMode];

export interface IdempotencyOptions {
  /** How long a key is remembered and its result replayed. Default 86 400 s (24 h, like Stripe). */
  retentionSeconds?: number;
  /** Transactional: how long a duplicate waits for the first request's transaction. Default 5 000 ms. */
  lockTimeoutMs?: number;
  /** Transactional: the interactive transaction's timeout. Default 15 000 ms. */
  transactionTimeoutMs?: number;
  /** External: how long a claim is owned before a retry may take it over. Default 30 s. */
  leaseSeconds?: number;
  /**
   * External: when a duplicate finds the key in progress, wait up to this long for it to finish and replay,
   * instead of answering 409 at once. Default 0 (answer 409 + Retry-After).
   */
  waitForInFlightMs?: number;
  /** The Retry-After value (seconds) sent with a 409 or a 429. Default 1. */
  retryAfterSeconds?: number;
  /**
   * How many keys one principal (scope) may have in flight — `processing` under a live lease — before a claim
   * of a NEW key is refused with 429 + Retry-After (nothing stored). Duplicates of keys already claimed are not
   * counted as new. A rate limit, so approximate under concurrency (see the store). `Infinity` turns it off.
   * Default 20.
   */
  maxInFlightPerScope?: number;
  /**
   * Error codes whose responses are stored and replayed: deterministic business outcomes. Every other error
   * releases the key so a retry runs again (validation errors, timeouts, 5xx). Default
   * `DEFAULT_STORED_ERROR_CODES`.
   */
  storedErrorCodes?: readonly string[];
  /**
   * What a request without an `Idempotency-Key` gets. `reject` (the default): 400. `passthrough`: the
   * procedure runs unprotected — nothing claimed, nothing stored, a retry runs it again — and the request is
   * reported as an `unkeyed` outcome. A rollout aid for clients that do not send a key yet; a malformed key
   * is still a 400.
   */
  missingKey?: MissingKeyPolicy;
  /**
   * Answers duplicates of completed keys from this process's memory (replay-cache.ts: `createReplayCache()`),
   * after the database has answered one of them. Default null: every duplicate asks the database.
   */
  replayCache?: ReplayCache | null;
}

export type MissingKeyPolicy = 'reject' | 'passthrough';
const MISSING_KEY_POLICIES: readonly MissingKeyPolicy[] = ['reject', 'passthrough'];

/** Business outcomes that a retry would only repeat: store them and replay them. */
export const DEFAULT_STORED_ERROR_CODES = [
  'PAYMENT_REQUIRED',
  'UNPROCESSABLE_CONTENT',
  'NOT_FOUND',
  'FORBIDDEN',
  'PRECONDITION_FAILED',
  'UNSUPPORTED_MEDIA_TYPE',
] as const;

export type ResolvedOptions = Required<IdempotencyOptions>;

export const DEFAULT_OPTIONS: ResolvedOptions = {
  retentionSeconds: 86_400,
  lockTimeoutMs: 5_000,
  transactionTimeoutMs: 15_000,
  leaseSeconds: 30,
  waitForInFlightMs: 0,
  retryAfterSeconds: 1,
  maxInFlightPerScope: 20,
  storedErrorCodes: DEFAULT_STORED_ERROR_CODES,
  missingKey: 'reject',
  replayCache: null,
};

export function resolveOptions(...layers: Array<IdempotencyOptions | undefined>): ResolvedOptions {
  const resolved: ResolvedOptions = { ...DEFAULT_OPTIONS };
  for (const layer of layers) {
    if (!layer) continue;
    for (const [name, value] of Object.entries(layer) as Array<[keyof ResolvedOptions, never]>) {
      if (value !== undefined) resolved[name] = value;
    }
  }
  assertPositive('retentionSeconds', resolved.retentionSeconds);
  assertPositive('lockTimeoutMs', resolved.lockTimeoutMs);
  assertPositive('transactionTimeoutMs', resolved.transactionTimeoutMs);
  assertPositive('leaseSeconds', resolved.leaseSeconds);
  assertPositive('retryAfterSeconds', resolved.retryAfterSeconds);
  // Retry-After is delay-seconds, 1*DIGIT (RFC 9110 §10.2.3): 1.5 would send an invalid header.
  if (!Number.isInteger(resolved.retryAfterSeconds))
    throw new RangeError(`retryAfterSeconds must be a whole number, got ${resolved.retryAfterSeconds}`);
  // NaN would pass a plain `< 0` check, and Infinity is an endless wait.
  if (!Number.isFinite(resolved.waitForInFlightMs) || resolved.waitForInFlightMs < 0)
    throw new RangeError(`waitForInFlightMs must be a finite number ≥ 0, got ${resolved.waitForInFlightMs}`);
  if (
    resolved.maxInFlightPerScope !== Number.POSITIVE_INFINITY &&
    (!Number.isInteger(resolved.maxInFlightPerScope) || resolved.maxInFlightPerScope < 1)
  )
    throw new RangeError(
      `maxInFlightPerScope must be a whole number ≥ 1 (or Infinity), got ${resolved.maxInFlightPerScope}`,
    );
  if (!MISSING_KEY_POLICIES.includes(resolved.missingKey))
    throw new RangeError(`missingKey must be 'reject' or 'passthrough', got ${String(resolved.missingKey)}`);
  return resolved;
}

function assertPositive(name: string, value: number) {
  if (!Number.isFinite(value) || value <= 0)
    throw new RangeError(`${name} must be a positive number, got ${value}`);
}

/** The claim's per-principal cap (`ClaimRequest.inFlightCap`) for these options; undefined when it is off. */
export function inFlightCapOf(
  options: ResolvedOptions,
): { max: number; retryAfterSeconds: number } | undefined {
  return Number.isFinite(options.maxInFlightPerScope)
    ? { max: options.maxInFlightPerScope, retryAfterSeconds: options.retryAfterSeconds }
    : undefined;
}
