/**
 * What the client reads from an operation's context and from what the network handed back (client/context.ts):
 * the key and the observer of a keyed mutation, the status and the `Idempotent-Replayed` header of a response.
 * These are read from untyped values (a context built by app code, an error from any link), so every odd shape
 * must read as "absent", never throw, and never pass a wrong type on.
 */
import { describe, expect, it } from 'vitest';
import {
  classifyFailure,
  getIdempotencyKey,
  getIdempotencyObserver,
  httpStatusOf,
  isNetworkError,
  isReplayedResponse,
  retryReasonOf,
} from '../src/client/index.ts';

describe('getIdempotencyKey', () => {
  // A helper called with `op.context` of an operation that has none, or with a context app code assembled:
  // "no key" must come back as undefined (the mutation is then not retried), not as a TypeError or a non-string.
  it.each([
    ['no context at all', undefined],
    ['a context without the field', {}],
    ['a number', { idempotencyKey: 42 }],
    ['an empty string', { idempotencyKey: '' }],
    ['an object', { idempotencyKey: { value: 'k-1' } }],
    ['null', { idempotencyKey: null }],
  ])('reads no key from %s', (_name, context) => {
    expect(getIdempotencyKey(context)).toBeUndefined();
  });

  it('reads a non-empty string key', () => {
    expect(getIdempotencyKey({ idempotencyKey: 'k-1' })).toBe('k-1');
  });
});

describe('getIdempotencyObserver', () => {
  // The link calls what this returns on every attempt: a non-function would throw inside the link (logged as an
  // observer bug on every event), so anything but a function is no observer.
  it.each([
    ['no context at all', undefined],
    ['a context without the field', {}],
    ['a string', { idempotencyObserver: 'console.log' }],
    ['an object', { idempotencyObserver: { next: () => {} } }],
    ['null', { idempotencyObserver: null }],
  ])('reads no observer from %s', (_name, context) => {
    expect(getIdempotencyObserver(context)).toBeUndefined();
  });

  it('reads a function observer', () => {
    const observer = () => {};
    expect(getIdempotencyObserver({ idempotencyObserver: observer })).toBe(observer);
  });
});

describe('the status of a failed request', () => {
  // httpStatusOf feeds the retry decision and the observer's `status`: a Response-like whose `status` is not a
  // number has no status (a string "503" must not be compared as one and retried as a 5xx).
  it.each([
    ['a string', '503'],
    ['null', null],
    ['missing', undefined],
  ])('is undefined when the Response’s status is %s', (_name, status) => {
    const error = { name: 'TRPCClientError', meta: { response: { status } } };
    expect(httpStatusOf(error)).toBeUndefined();
    expect(retryReasonOf(error)).toBeUndefined();
  });

  it('control: is the Response’s numeric status', () => {
    expect(httpStatusOf({ name: 'TRPCClientError', meta: { response: { status: 503 } } })).toBe(503);
  });
});

describe('a failure without a Response object', () => {
  // A custom terminating link or fetch wrapper may leave `meta.response` null or a placeholder value when the
  // request got no answer. That is still "no response at all": a network error, retried with the same key.
  it.each([
    ['null', null],
    ['a string', 'no response'],
    ['a number', 0],
  ])('is a network error when meta.response is %s', (_name, response) => {
    const error = { name: 'TRPCClientError', meta: { response } };
    expect(isNetworkError(error)).toBe(true);
    expect(classifyFailure(error)).toBe('retry');
  });

  it('control: with a Response object it is not a network error', () => {
    const error = { name: 'TRPCClientError', meta: { response: { status: 400 } } };
    expect(isNetworkError(error)).toBe(false);
    expect(classifyFailure(error)).toBe('final');
  });
});

describe('isReplayedResponse', () => {
  /** A Response-like whose headers hand the raw value back (a fetch Headers object would trim it). */
  const withRawHeader = (value: string | null) => ({
    headers: { get: (name: string) => (name === 'Idempotent-Replayed' ? value : null) },
  });

  // `replayed` tells the app "this is the stored result of an earlier attempt" (e.g. "your order was already
  // placed"): the header is `true` or the structured-field boolean `?1`, in any case, with optional whitespace.
  it.each(['true', 'TRUE', 'True', '?1', ' true', 'true ', '\ttrue\t', '  ?1  '])('accepts %j', (value) => {
    expect(isReplayedResponse(withRawHeader(value))).toBe(true);
  });

  // …and nothing that merely contains it: a fresh result must never be shown as a replay.
  it.each(['nottrue', 'xtrue', 'true1', 'truex', 'tru e', '?10', 'x?1', 'false', '?0', '', ' '])(
    'refuses %j',
    (value) => {
      expect(isReplayedResponse(withRawHeader(value))).toBe(false);
    },
  );

  it('refuses an absent header, a response without headers, and no response', () => {
    expect(isReplayedResponse(withRawHeader(null))).toBe(false);
    expect(isReplayedResponse(new Response(null))).toBe(false);
    expect(isReplayedResponse({})).toBe(false);
    expect(isReplayedResponse(undefined)).toBe(false);
  });

  it('reads a real fetch Response, whatever the case of the header’s name', () => {
    expect(isReplayedResponse(new Response(null, { headers: { 'idempotent-replayed': 'true' } }))).toBe(true);
    expect(isReplayedResponse(new Response(null, { headers: { 'Idempotent-Replayed': '?1' } }))).toBe(true);
  });
});
