/**
 * payloadEquals, directly: the browser's "is this the request I sent before?" must agree with the server's
 * fingerprint for every kind of value — primitives, nested objects, and what a transformer (superjson) sends
 * for a Set or a Date — and refuse what has no JSON form.
 */
import superjson from 'superjson';
import { describe, expect, it } from 'vitest';
import { fingerprintRequest } from '../src/index.ts';
import {
  jsonSerializer,
  payloadEquals,
  serializePayload,
  transformerSerializer,
} from '../src/react/payload.ts';

describe('payloadEquals', () => {
  it('compares primitives by value and type', () => {
    expect(payloadEquals(1, 1)).toBe(true);
    expect(payloadEquals(1, 2)).toBe(false);
    expect(payloadEquals('1', 1)).toBe(false);
    expect(payloadEquals(true, true)).toBe(true);
    expect(payloadEquals(true, false)).toBe(false);
    expect(payloadEquals('a', 'a')).toBe(true);
    expect(payloadEquals('a', 'b')).toBe(false);
    expect(payloadEquals(null, null)).toBe(true);
    expect(payloadEquals(0, null)).toBe(false);
    // No input and a null input are the same request (the server fingerprints both as null).
    expect(payloadEquals(undefined, null)).toBe(true);
  });

  it('compares objects member by member at any depth, whatever the key order', () => {
    expect(payloadEquals({ quantity: 1 }, { quantity: 1 })).toBe(true);
    expect(payloadEquals({ quantity: 1 }, { quantity: 2 })).toBe(false);
    expect(payloadEquals({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toBe(true);
    expect(payloadEquals({ a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [2, 1] } })).toBe(false);
    expect(payloadEquals({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(payloadEquals([], {})).toBe(false);
  });

  it('is true exactly when the server would fingerprint the two alike', () => {
    const pairs: Array<[unknown, unknown]> = [
      [{ quantity: 1 }, { quantity: 2 }],
      [
        { a: 1, b: 2 },
        { b: 2, a: 1 },
      ],
      [{ a: undefined }, {}],
      [
        [1, undefined],
        [1, null],
      ],
      ['x', 'y'],
    ];
    for (const [a, b] of pairs)
      expect(payloadEquals(a, b)).toBe(fingerprintRequest('p', a) === fingerprintRequest('p', b));
  });

  it('plain JSON: a Date is its ISO text, an undefined property is absent, a Set is {}', () => {
    const at = new Date(Date.UTC(2026, 0, 15, 12));
    expect(payloadEquals({ at }, { at: '2026-01-15T12:00:00.000Z' })).toBe(true);
    expect(payloadEquals({ at }, { at: new Date(Date.UTC(2026, 0, 15, 13)) })).toBe(false);
    expect(payloadEquals({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    // What plain JSON sends for a Set: nothing of its members.
    expect(payloadEquals(new Set([1]), new Set([2]))).toBe(true);
  });

  it('superjson: Sets and Dates are compared by content, and an undefined property counts', () => {
    expect(payloadEquals(new Set([1, 2]), new Set([1, 2]), superjson)).toBe(true);
    expect(payloadEquals(new Set([1, 2]), new Set([1, 3]), superjson)).toBe(false);
    expect(payloadEquals({ ids: new Set(['a']) }, { ids: ['a'] }, superjson)).toBe(false);
    const at = new Date(Date.UTC(2026, 0, 15, 12));
    expect(payloadEquals({ at }, { at: new Date(at.getTime()) }, superjson)).toBe(true);
    expect(payloadEquals({ at }, { at: new Date(at.getTime() + 1) }, superjson)).toBe(false);
    expect(payloadEquals({ at }, { at: at.toISOString() }, superjson)).toBe(false);
    expect(payloadEquals({ a: 1, b: undefined }, { a: 1 }, superjson)).toBe(false);
  });

  it('throws a TypeError for a payload with no JSON form', () => {
    expect(() => payloadEquals({ n: Number.NaN }, { n: 1 })).toThrow(TypeError);
    expect(() => payloadEquals({ n: 1 }, { s: '\ud800' })).toThrow(TypeError);
  });
});

describe('serializePayload', () => {
  it('returns the stored text when the payload survives the round trip', () => {
    expect(serializePayload(jsonSerializer, { b: 2, a: [1] })).toBe('{"b":2,"a":[1]}');
    const sj = transformerSerializer(superjson);
    const text = serializePayload(sj, { ids: new Set([1]) }, superjson);
    expect(payloadEquals(sj.parse(text), { ids: new Set([1]) }, superjson)).toBe(true);
  });

  it('refuses a payload that would come back as another request (a Date through plain JSON under superjson)', () => {
    expect(() => serializePayload(jsonSerializer, { at: new Date(0) }, superjson)).toThrow(TypeError);
  });
});
