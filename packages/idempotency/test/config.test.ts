import { describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import { DEFAULT_OPTIONS, DEFAULT_STORED_ERROR_CODES, type IdempotencyOptions } from '../src/index.ts';

describe('resolveOptions', () => {
  it('applies the documented defaults', () => {
    expect(resolveOptions()).toEqual({
      retentionSeconds: 86_400,
      lockTimeoutMs: 5_000,
      transactionTimeoutMs: 15_000,
      leaseSeconds: 30,
      waitForInFlightMs: 0,
      retryAfterSeconds: 1,
      maxInFlightPerScope: 20,
      storedErrorCodes: [
        'PAYMENT_REQUIRED',
        'UNPROCESSABLE_CONTENT',
        'NOT_FOUND',
        'FORBIDDEN',
        'PRECONDITION_FAILED',
        'UNSUPPORTED_MEDIA_TYPE',
      ],
      missingKey: 'reject',
      replayCache: null,
    });
    expect(resolveOptions(undefined, {})).toEqual(DEFAULT_OPTIONS);
    expect(DEFAULT_OPTIONS.storedErrorCodes).toBe(DEFAULT_STORED_ERROR_CODES);
  });

  it('never stores transient or validation failures by default', () => {
    for (const code of ['INTERNAL_SERVER_ERROR', 'BAD_REQUEST', 'TIMEOUT', 'CONFLICT', 'TOO_MANY_REQUESTS'])
      expect(DEFAULT_STORED_ERROR_CODES).not.toContain(code);
  });

  it('layers overrides: later layers win, undefined values do not erase', () => {
    const defaults: IdempotencyOptions = { retentionSeconds: 3_600, leaseSeconds: 10, retryAfterSeconds: 2 };
    const perProcedure: IdempotencyOptions = {
      leaseSeconds: 5,
      retryAfterSeconds: undefined,
      storedErrorCodes: ['PAYMENT_REQUIRED'],
    };
    const resolved = resolveOptions(defaults, undefined, perProcedure);
    expect(resolved).toEqual({
      ...DEFAULT_OPTIONS,
      retentionSeconds: 3_600,
      leaseSeconds: 5,
      retryAfterSeconds: 2,
      storedErrorCodes: ['PAYMENT_REQUIRED'],
    });
    // The layers and the defaults are not mutated.
    expect(defaults).toEqual({ retentionSeconds: 3_600, leaseSeconds: 10, retryAfterSeconds: 2 });
    expect(DEFAULT_OPTIONS.leaseSeconds).toBe(30);
    expect(resolveOptions().leaseSeconds).toBe(30);
  });

  it('accepts waitForInFlightMs = 0 and fractional positive durations', () => {
    expect(resolveOptions({ waitForInFlightMs: 0 }).waitForInFlightMs).toBe(0);
    expect(resolveOptions({ waitForInFlightMs: 2_000 }).waitForInFlightMs).toBe(2_000);
    expect(resolveOptions({ leaseSeconds: 0.5 }).leaseSeconds).toBe(0.5);
  });

  it.each<[string, IdempotencyOptions]>([
    ['retentionSeconds = 0', { retentionSeconds: 0 }],
    ['retentionSeconds < 0', { retentionSeconds: -1 }],
    ['retentionSeconds = NaN', { retentionSeconds: Number.NaN }],
    ['retentionSeconds = Infinity', { retentionSeconds: Number.POSITIVE_INFINITY }],
    ['lockTimeoutMs = 0', { lockTimeoutMs: 0 }],
    ['lockTimeoutMs = NaN', { lockTimeoutMs: Number.NaN }],
    ['transactionTimeoutMs < 0', { transactionTimeoutMs: -5 }],
    ['leaseSeconds = 0', { leaseSeconds: 0 }],
    ['leaseSeconds = Infinity', { leaseSeconds: Number.POSITIVE_INFINITY }],
    ['retryAfterSeconds = 0', { retryAfterSeconds: 0 }],
    // Retry-After is delay-seconds: 1*DIGIT (RFC 9110 §10.2.3).
    ['retryAfterSeconds = 1.5', { retryAfterSeconds: 1.5 }],
    ['waitForInFlightMs < 0', { waitForInFlightMs: -1 }],
    ['waitForInFlightMs = NaN', { waitForInFlightMs: Number.NaN }],
    ['waitForInFlightMs = Infinity', { waitForInFlightMs: Number.POSITIVE_INFINITY }],
    ['missingKey = "allow" (not a policy)', { missingKey: 'allow' as never }],
    ['maxInFlightPerScope = 0', { maxInFlightPerScope: 0 }],
    ['maxInFlightPerScope = 1.5', { maxInFlightPerScope: 1.5 }],
    ['maxInFlightPerScope = NaN', { maxInFlightPerScope: Number.NaN }],
  ])('rejects %s with a RangeError that names the option and the value', (_name, layer) => {
    const [option, value] = Object.entries(layer)[0] ?? [];
    expect(() => resolveOptions(layer)).toThrow(RangeError);
    expect(() => resolveOptions(layer)).toThrow(`${option} must be`);
    expect(() => resolveOptions(layer)).toThrow(`got ${String(value)}`);
  });

  it('accepts maxInFlightPerScope = 1 (one key in flight per principal) and Infinity (no cap)', () => {
    expect(resolveOptions({ maxInFlightPerScope: 1 }).maxInFlightPerScope).toBe(1);
    expect(resolveOptions({ maxInFlightPerScope: Number.POSITIVE_INFINITY }).maxInFlightPerScope).toBe(
      Number.POSITIVE_INFINITY,
    );
  });

  it('validates the merged result, whichever layer the bad value comes from', () => {
    expect(() => resolveOptions({ leaseSeconds: -1 }, {})).toThrow(RangeError);
    expect(() => resolveOptions({}, { leaseSeconds: -1 })).toThrow(RangeError);
    // A later valid layer fixes an earlier invalid one.
    expect(resolveOptions({ leaseSeconds: -1 }, { leaseSeconds: 3 }).leaseSeconds).toBe(3);
  });
});
