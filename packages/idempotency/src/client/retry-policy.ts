/**
 * When a keyed mutation may be re-sent, and after how long. Pure functions, no tRPC runtime.
 *
 * Retrying is safe only because every attempt carries the SAME Idempotency-Key: the server runs the mutation
 * at most once and replays its stored result to every duplicate. What is retried is what may succeed on a
 * second try without the client changing anything:
 * - no HTTP response at all (fetch failed, connection reset, an unreadable body): the request may or may not
 *   have reached the server — the same key makes re-sending it harmless;
 * - HTTP 5xx: a transient failure; the server released the key, so a retry runs again;
 * - HTTP 409 (CONFLICT): the same key is still in flight; wait (`Retry-After`) and ask again;
 * - HTTP 429 (TOO_MANY_REQUESTS): refused before anything ran (the caller has too many keys in flight, or a
 *   rate limit); nothing was stored, so the same key is safe to send again after `Retry-After`.
 * Everything else is final: 4xx validation, 401/403, 402 declined, 422 out of stock or key reused, … A retry
 * with the same key would only replay the same answer (or fail the same way).
 */
import { DEFAULT_BASE_DELAY_MS, DEFAULT_MAX_DELAY_MS, DEFAULT_MAX_RETRY_AFTER_MS } from './constants.ts';
import { errorResponseOf, property, responseStatus } from './context.ts';
import { MissingIdempotencyKeyError } from './missing-key-error.ts';

export interface BackoffOptions {
  /** The first retry's delay ceiling. Default 500 ms. */
  baseDelayMs?: number;
  /** No delay ceiling above this. Default 5000 ms. */
  maxDelayMs?: number;
  /** A number in [0, 1): the jitter. Default `Math.random`. */
  random?: () => number;
}

/**
 * Capped exponential backoff with jitter in the upper half of the ceiling ("equal jitter", as stripe-node):
 * `ceiling × (1 + random()) / 2`, where `ceiling = min(maxDelayMs, baseDelayMs × 2 ** (attempt − 1))` and
 * `attempt` is the 1-based number of the attempt that just failed. Ceilings 0.5 s, 1 s, 2 s, 4 s, 5 s, 5 s…
 * The jitter still spreads clients that failed together; its floor, half the ceiling, is what lets a number of
 * attempts promise a least total wait (full jitter's waits can all be near 0, whatever the number).
 */
export function backoffDelayMs(
  attempt: number,
  {
    baseDelayMs = DEFAULT_BASE_DELAY_MS,
    maxDelayMs = DEFAULT_MAX_DELAY_MS,
    random = Math.random,
  }: BackoffOptions = {},
): number {
  const n = Number.isFinite(attempt) ? Math.max(1, Math.floor(attempt)) : 1;
  const ceiling = Math.max(0, Math.min(maxDelayMs, baseDelayMs * 2 ** (n - 1)));
  const jitter = random();
  const draw = Number.isFinite(jitter) ? Math.min(1, Math.max(0, jitter)) : 1;
  return (ceiling * (1 + draw)) / 2;
}

const DELTA_SECONDS = /^\d+$/;
/** IMF-fixdate, the obsolete RFC 850 date, and asctime: all start with a day name. */
const HTTP_DATE = /^(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s/i;
/** asctime (`Sun Nov  6 08:49:37 1994`) has no zone; HTTP dates are always GMT. */
const ASCTIME = /^[a-z]{3} [a-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/i;

/**
 * `Retry-After` (RFC 9110 §10.2.3) as milliseconds from `now`: delta-seconds (`"2"`) or an HTTP-date (a past
 * date → 0), capped at `maxMs` (default 30 s). Missing or invalid (negative, fractional, garbage) → undefined.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
  maxMs: number = DEFAULT_MAX_RETRY_AFTER_MS,
): number | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value.trim();
  if (DELTA_SECONDS.test(text)) return Math.min(Number(text) * 1000, maxMs);
  if (!HTTP_DATE.test(text)) return undefined;
  const at = Date.parse(ASCTIME.test(text) ? `${text} GMT` : text);
  return Number.isFinite(at) ? Math.min(Math.max(0, at - now), maxMs) : undefined;
}

export type FailureClass = 'retry' | 'final';
/** Why a failure is retried: no response, a 5xx, a 409 (the same key is still in flight), or a 429. */
export type RetryReason = 'network' | 'server-error' | 'in-progress' | 'throttled';

/** The error's `data` (a tRPC error response's data: `code`, `httpStatus`, …), if the server sent one. */
const errorData = (error: unknown): unknown => property(error, 'data');

/**
 * The HTTP status behind an error: the error shape's `data.httpStatus` (per operation, also inside a batch),
 * else the status of the Response (`error.meta.response`). Undefined when there was no response.
 */
export function httpStatusOf(error: unknown): number | undefined {
  const status = property(errorData(error), 'httpStatus');
  return typeof status === 'number' ? status : responseStatus(errorResponseOf(error));
}

/** An abort (the caller's signal, a timeout signal): never retried — the caller decided. */
export function isAbortError(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 3; current = property(current, 'cause'), depth++) {
    const name = property(current, 'name');
    if (name === 'AbortError' || name === 'TimeoutError') return true;
  }
  return false;
}

/**
 * No HTTP response at all: a TRPCClientError without `data` and without `meta.response` (fetch rejected, or
 * the body was not tRPC JSON — e.g. a proxy's HTML error page), or a bare fetch `TypeError`. Not the retry
 * link's own refusal of a mutation without its key (`MissingIdempotencyKeyError`): that one never left.
 */
export function isNetworkError(error: unknown): boolean {
  if (isAbortError(error)) return false;
  // Refused in the browser before it was sent: no response, yet nothing a retry would change.
  if (property(error, 'cause') instanceof MissingIdempotencyKeyError) return false;
  if (error instanceof TypeError) return true;
  return (
    property(error, 'name') === 'TRPCClientError' &&
    errorData(error) == null &&
    errorResponseOf(error) === undefined
  );
}

/** tRPC codes whose HTTP status is 5xx (for errors that carry a code but no status). */
const SERVER_ERROR_CODE =
  /^(?:INTERNAL_SERVER_ERROR|NOT_IMPLEMENTED|BAD_GATEWAY|SERVICE_UNAVAILABLE|GATEWAY_TIMEOUT)$/;

/** Why `error` is worth another attempt with the same key, or undefined when it is final. */
export function retryReasonOf(error: unknown): RetryReason | undefined {
  if (isAbortError(error)) return undefined;
  const status = httpStatusOf(error);
  if (status !== undefined) {
    if (status >= 500 && status <= 599) return 'server-error';
    if (status === 429) return 'throttled';
    return status === 409 ? 'in-progress' : undefined;
  }
  const code = property(errorData(error), 'code');
  if (typeof code === 'string') {
    if (code === 'CONFLICT') return 'in-progress';
    if (code === 'TOO_MANY_REQUESTS') return 'throttled';
    return SERVER_ERROR_CODE.test(code) ? 'server-error' : undefined;
  }
  return isNetworkError(error) ? 'network' : undefined;
}

/**
 * `'retry'` for a network error (no response), an HTTP 5xx, a 409 in-progress (CONFLICT) or a 429; `'final'` for
 * everything else — 400 validation, 401/403, 402 declined, 422 (out of stock, or the key reused with another
 * payload), an abort.
 */
export function classifyFailure(error: unknown): FailureClass {
  return retryReasonOf(error) === undefined ? 'final' : 'retry';
}
