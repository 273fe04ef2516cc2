/** The retry policy as pure functions: backoff schedule, Retry-After parsing, failure classification. */
import { TRPCClientError } from '@trpc/client';
import { describe, expect, it } from 'vitest';
import {
  backoffDelayMs,
  classifyFailure,
  DEFAULT_MAX_ATTEMPTS,
  httpStatusOf,
  idempotencyHeaders,
  isAbortError,
  isNetworkError,
  parseRetryAfter,
  retryReasonOf,
} from '../src/client/index.ts';

describe('backoffDelayMs', () => {
  it('doubles from 0.5 s and caps at 5 s (random() = 1: the ceilings)', () => {
    const schedule = [1, 2, 3, 4, 5, 6, 10].map((attempt) => backoffDelayMs(attempt, { random: () => 1 }));
    expect(schedule).toEqual([500, 1000, 2000, 4000, 5000, 5000, 5000]);
  });

  it('is equal jitter: ceiling × (1 + random()) / 2, from half the ceiling to all of it', () => {
    expect([1, 2, 3, 4, 5].map((attempt) => backoffDelayMs(attempt, { random: () => 0.5 }))).toEqual([
      375, 750, 1500, 3000, 3750,
    ]);
    expect([1, 2, 3, 4, 5].map((attempt) => backoffDelayMs(attempt, { random: () => 0 }))).toEqual([
      250, 500, 1000, 2000, 2500,
    ]);
  });

  it('stays within [ceiling / 2, ceiling] with Math.random', () => {
    for (const [attempt, ceiling] of [
      [1, 500],
      [2, 1000],
      [3, 2000],
      [4, 4000],
      [5, 5000],
      [8, 5000],
    ] as const) {
      for (let i = 0; i < 200; i++) {
        const delay = backoffDelayMs(attempt);
        expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
        expect(delay).toBeLessThanOrEqual(ceiling);
      }
    }
  });

  // What the defaults promise (README, constants.ts): the 7 waits of 8 attempts add up to 11.25–22.5 s.
  it('the default schedule waits 11.25 s in all at the least and 22.5 s at the most', () => {
    const total = (draw: number) =>
      Array.from({ length: DEFAULT_MAX_ATTEMPTS - 1 }, (_, i) =>
        backoffDelayMs(i + 1, { random: () => draw }),
      ).reduce((sum, ms) => sum + ms, 0);
    expect(DEFAULT_MAX_ATTEMPTS).toBe(8);
    expect(total(0)).toBe(11_250);
    expect(total(0.5)).toBe(16_875);
    expect(total(1)).toBe(22_500);
  });

  it('honours baseDelayMs and maxDelayMs, and tolerates odd inputs', () => {
    const options = { baseDelayMs: 100, maxDelayMs: 350, random: () => 1 };
    expect([1, 2, 3, 4].map((attempt) => backoffDelayMs(attempt, options))).toEqual([100, 200, 350, 350]);
    expect(backoffDelayMs(0, { random: () => 1 })).toBe(500);
    expect(backoffDelayMs(Number.NaN, { random: () => 1 })).toBe(500);
    expect(backoffDelayMs(2000, { random: () => 1 })).toBe(5000);
    expect(backoffDelayMs(1, { random: () => 7 })).toBe(500);
    expect(backoffDelayMs(1, { random: () => -1 })).toBe(250);
    expect(backoffDelayMs(1, { random: () => Number.NaN })).toBe(500);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.UTC(2026, 0, 15, 12, 0, 0);

  it('reads delta-seconds', () => {
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
  });

  it('reads an HTTP-date relative to now (IMF-fixdate, RFC 850, asctime)', () => {
    expect(parseRetryAfter(new Date(now + 3000).toUTCString(), now)).toBe(3000);
    expect(parseRetryAfter('Thursday, 15-Jan-26 12:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Thu Jan 15 12:00:04 2026', now)).toBe(4000);
  });

  it('reads asctime as GMT whatever the machine’s zone (the new-york test project runs this too)', () => {
    // asctime carries no zone; HTTP dates are always GMT (RFC 9110 §5.6.7). Read as local time, this is 5 h off
    // in New York, and the cap turns it into 30 s.
    expect(parseRetryAfter('Thu Jan 15 12:00:09 2026', now)).toBe(9000);
    expect(parseRetryAfter('Sun Nov  6 08:49:37 1994', Date.UTC(1994, 10, 6, 8, 49, 30))).toBe(7000);
    // Already zoned forms are never given a second zone.
    expect(parseRetryAfter('Thu, 15 Jan 2026 12:00:09 GMT', now)).toBe(9000);
  });

  it('gives 0 for a date in the past', () => {
    expect(parseRetryAfter(new Date(now - 60_000).toUTCString(), now)).toBe(0);
  });

  it('caps long waits (default 30 s)', () => {
    expect(parseRetryAfter('120', now)).toBe(30_000);
    expect(parseRetryAfter('99999999999999999999', now)).toBe(30_000);
    expect(parseRetryAfter(new Date(now + 3_600_000).toUTCString(), now)).toBe(30_000);
    expect(parseRetryAfter('120', now, 10_000)).toBe(10_000);
  });

  it('rejects what is not delta-seconds or an HTTP-date', () => {
    for (const value of [
      null,
      undefined,
      '',
      '  ',
      '-1',
      '1.5',
      '1e3',
      'soon',
      '2026-01-15T12:00:05Z',
      '3 s',
    ]) {
      expect(parseRetryAfter(value, now), String(value)).toBeUndefined();
    }
  });
});

/** A TRPCClientError as httpLink builds it for an HTTP error response. */
function httpError(httpStatus: number, code: string, headers: Record<string, string> = {}) {
  return TRPCClientError.from(
    { error: { code: -32000, message: code, data: { code, httpStatus } } },
    { meta: { response: new Response(null, { status: httpStatus, headers }) } },
  );
}

describe('classifyFailure', () => {
  const table: Array<[string, unknown, 'retry' | 'final']> = [
    [
      'network error (fetch TypeError through httpLink)',
      TRPCClientError.from(new TypeError('fetch failed')),
      'retry',
    ],
    ['bare fetch TypeError', new TypeError('Failed to fetch'), 'retry'],
    ['unreadable body (no tRPC JSON)', TRPCClientError.from(new SyntaxError('Unexpected token <')), 'retry'],
    ['500 INTERNAL_SERVER_ERROR', httpError(500, 'INTERNAL_SERVER_ERROR'), 'retry'],
    ['502 BAD_GATEWAY', httpError(502, 'BAD_GATEWAY'), 'retry'],
    ['503 SERVICE_UNAVAILABLE', httpError(503, 'SERVICE_UNAVAILABLE'), 'retry'],
    ['409 CONFLICT (in progress)', httpError(409, 'CONFLICT', { 'Retry-After': '1' }), 'retry'],
    ['400 BAD_REQUEST (validation)', httpError(400, 'BAD_REQUEST'), 'final'],
    ['401 UNAUTHORIZED', httpError(401, 'UNAUTHORIZED'), 'final'],
    ['403 FORBIDDEN', httpError(403, 'FORBIDDEN'), 'final'],
    ['402 PAYMENT_REQUIRED (declined)', httpError(402, 'PAYMENT_REQUIRED'), 'final'],
    ['404 NOT_FOUND', httpError(404, 'NOT_FOUND'), 'final'],
    [
      '422 UNPROCESSABLE_CONTENT (out of stock, key reused)',
      httpError(422, 'UNPROCESSABLE_CONTENT'),
      'final',
    ],
    // Refused before anything ran (the in-flight cap): nothing stored, the same key is safe to resend.
    ['429 TOO_MANY_REQUESTS', httpError(429, 'TOO_MANY_REQUESTS', { 'Retry-After': '1' }), 'retry'],
    [
      'a code without httpStatus: TOO_MANY_REQUESTS',
      { name: 'TRPCClientError', data: { code: 'TOO_MANY_REQUESTS' } },
      'retry',
    ],
    ['abort', TRPCClientError.from(new DOMException('aborted', 'AbortError')), 'final'],
    ['timeout signal', TRPCClientError.from(new DOMException('timed out', 'TimeoutError')), 'final'],
    [
      'a status only on the Response: 503',
      { name: 'TRPCClientError', meta: { response: { status: 503 } } },
      'retry',
    ],
    [
      'a status only on the Response: 400',
      { name: 'TRPCClientError', meta: { response: { status: 400 } } },
      'final',
    ],
    ['a code without httpStatus: CONFLICT', { name: 'TRPCClientError', data: { code: 'CONFLICT' } }, 'retry'],
    ['a code without httpStatus: SERVICE_UNAVAILABLE', { data: { code: 'SERVICE_UNAVAILABLE' } }, 'retry'],
    [
      'a code without httpStatus: BAD_REQUEST',
      { name: 'TRPCClientError', data: { code: 'BAD_REQUEST' } },
      'final',
    ],
    ['a programming error', new RangeError('bug'), 'final'],
    ['not an error', 'oops', 'final'],
  ];

  it.each(table)('%s → %s', (_name, error, expected) => {
    expect(classifyFailure(error)).toBe(expected);
  });

  it('retries every 5xx up to 599 and nothing above it', () => {
    expect(retryReasonOf(httpError(500, 'INTERNAL_SERVER_ERROR'))).toBe('server-error');
    expect(retryReasonOf({ data: { httpStatus: 599 } })).toBe('server-error');
    expect(retryReasonOf({ data: { httpStatus: 600 } })).toBeUndefined();
    expect(retryReasonOf({ data: { httpStatus: 499 } })).toBeUndefined();
  });

  it('names the reason for a code without a status', () => {
    expect(retryReasonOf({ data: { code: 'CONFLICT' } })).toBe('in-progress');
    expect(retryReasonOf({ data: { code: 'TOO_MANY_REQUESTS' } })).toBe('throttled');
    expect(retryReasonOf({ data: { code: 'BAD_GATEWAY' } })).toBe('server-error');
    expect(retryReasonOf(httpError(429, 'TOO_MANY_REQUESTS'))).toBe('throttled');
  });

  it('never retries an abort, whatever status or code it carries', () => {
    expect(retryReasonOf({ name: 'AbortError', data: { httpStatus: 503 } })).toBeUndefined();
    expect(retryReasonOf({ name: 'TimeoutError', data: { code: 'CONFLICT' } })).toBeUndefined();
  });

  it('finds an abort up to two causes deep, no deeper', () => {
    const abort = { name: 'AbortError' };
    expect(isAbortError(abort)).toBe(true);
    expect(isAbortError({ name: 'TRPCClientError', cause: { cause: abort } })).toBe(true);
    expect(isAbortError({ name: 'TRPCClientError', cause: { cause: { cause: abort } } })).toBe(false);
    expect(isAbortError(new Error('fetch failed', { cause: new Error('reset') }))).toBe(false);
  });

  it('a network error is one with no response at all: not an abort, not one with data or a Response', () => {
    expect(isNetworkError(TRPCClientError.from(new TypeError('fetch failed')))).toBe(true);
    expect(isNetworkError(TRPCClientError.from(new DOMException('aborted', 'AbortError')))).toBe(false);
    expect(isNetworkError({ name: 'TRPCClientError', data: { code: 'BAD_GATEWAY' } })).toBe(false);
    expect(isNetworkError({ name: 'TRPCClientError', meta: { response: { status: 502 } } })).toBe(false);
    expect(isNetworkError({ name: 'TRPCClientError' })).toBe(true);
  });

  it('names the reason and the status', () => {
    expect(retryReasonOf(TRPCClientError.from(new TypeError('fetch failed')))).toBe('network');
    expect(retryReasonOf(httpError(503, 'SERVICE_UNAVAILABLE'))).toBe('server-error');
    expect(retryReasonOf(httpError(409, 'CONFLICT'))).toBe('in-progress');
    expect(retryReasonOf(httpError(402, 'PAYMENT_REQUIRED'))).toBeUndefined();
    expect(httpStatusOf(httpError(402, 'PAYMENT_REQUIRED'))).toBe(402);
    expect(httpStatusOf(TRPCClientError.from(new TypeError('fetch failed')))).toBeUndefined();
  });
});

describe('idempotencyHeaders', () => {
  it('sends the key of a keyed mutation', () => {
    expect(idempotencyHeaders({ type: 'mutation', context: { idempotencyKey: 'k-1' } })).toEqual({
      'Idempotency-Key': 'k-1',
    });
  });

  it('sends nothing for queries, subscriptions, and mutations without a (string, non-empty) key', () => {
    expect(idempotencyHeaders({ type: 'query', context: { idempotencyKey: 'k-1' } })).toEqual({});
    expect(idempotencyHeaders({ type: 'subscription', context: { idempotencyKey: 'k-1' } })).toEqual({});
    expect(idempotencyHeaders({ type: 'mutation', context: {} })).toEqual({});
    expect(idempotencyHeaders({ type: 'mutation', context: { idempotencyKey: '' } })).toEqual({});
    expect(idempotencyHeaders({ type: 'mutation', context: { idempotencyKey: 42 } })).toEqual({});
  });
});
