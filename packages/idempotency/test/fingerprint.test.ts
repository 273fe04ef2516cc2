import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import superjson from 'superjson';
import { describe, expect, it } from 'vitest';
import { canonicalWireForm, fingerprintRequest } from '../src/index.ts';

const path = 'checkout.placeOrder';

describe('fingerprintRequest', () => {
  it('is the SHA-256 (hex) of the RFC 8785 canonical JSON of { path, input }', () => {
    const expected = createHash('sha256')
      .update('{"input":{"a":1,"b":[true,null,"x"]},"path":"checkout.placeOrder"}', 'utf8')
      .digest('hex');
    expect(fingerprintRequest(path, { b: [true, null, 'x'], a: 1 })).toBe(expected);
    expect(fingerprintRequest(path, { a: 1 })).toMatch(/^[0-9a-f]{64}$/);
  });

  it('does not depend on object key order, at any depth', () => {
    const a = { email: 'a@example.com', items: [{ sku: 'X', quantity: 1, meta: { b: 2, a: 1 } }] };
    const b = { items: [{ meta: { a: 1, b: 2 }, quantity: 1, sku: 'X' }], email: 'a@example.com' };
    expect(fingerprintRequest(path, a)).toBe(fingerprintRequest(path, b));
  });

  it('depends on array order', () => {
    const items = [
      { sku: 'X', quantity: 1 },
      { sku: 'Y', quantity: 2 },
    ];
    expect(fingerprintRequest(path, { items })).not.toBe(
      fingerprintRequest(path, { items: [...items].reverse() }),
    );
    expect(fingerprintRequest(path, [1, 2])).not.toBe(fingerprintRequest(path, [2, 1]));
  });

  it('depends on the procedure path', () => {
    const input = { a: 1 };
    expect(fingerprintRequest('a.b', input)).not.toBe(fingerprintRequest('a.c', input));
    expect(fingerprintRequest('a.b', input)).toBe(fingerprintRequest('a.b', { a: 1 }));
  });

  it('treats an undefined input as a null input', () => {
    expect(fingerprintRequest(path, undefined)).toBe(fingerprintRequest(path, null));
    // …but not as an empty object.
    expect(fingerprintRequest(path, undefined)).not.toBe(fingerprintRequest(path, {}));
  });

  it('changes with any value', () => {
    const base = { quantity: 1, sku: 'X', note: 'a' };
    const fingerprint = fingerprintRequest(path, base);
    expect(fingerprintRequest(path, { ...base })).toBe(fingerprint);
    for (const changed of [
      { ...base, quantity: 2 },
      { ...base, quantity: '1' },
      { ...base, sku: 'x' },
      { ...base, note: null },
      { ...base, extra: true },
      { quantity: 1, sku: 'X' },
    ]) {
      expect(fingerprintRequest(path, changed)).not.toBe(fingerprint);
    }
  });

  it('canonicalizes numbers (1.0 and 1 are the same JSON number)', () => {
    expect(fingerprintRequest(path, { n: 1.0 })).toBe(fingerprintRequest(path, { n: 1 }));
    expect(fingerprintRequest(path, { n: 1e21 })).toBe(
      fingerprintRequest(path, { n: 1000000000000000000000 }),
    );
  });

  it('throws for an input that is not representable as JSON (never a silent collision)', () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    for (const input of [Number.NaN, Number.POSITIVE_INFINITY, { n: 10n }, { s: '\ud800' }, circular])
      expect(() => fingerprintRequest(path, input)).toThrow();
    // Control: the same shapes with JSON values are fine.
    expect(fingerprintRequest(path, { n: 10, s: 'ok', self: {} })).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses a function or a Symbol as the input with a TypeError (it has no JSON form at all)', () => {
    for (const input of [() => 1, Symbol('input')]) {
      expect(() => fingerprintRequest(path, input)).toThrow(TypeError);
      expect(() => fingerprintRequest(path, input)).toThrow('cannot be represented as canonical JSON');
    }
  });

  it('is the hash of canonicalize({ path, input }), byte for byte (stored fingerprints stay valid)', () => {
    for (const input of [{ b: [1, { y: 2, x: 'é' }], a: null }, [true], 'text', 0, null, { s: '\u2028"' }]) {
      const expected = createHash('sha256')
        .update(canonicalize({ path, input }) ?? '', 'utf8')
        .digest('hex');
      expect(fingerprintRequest(path, input)).toBe(expected);
    }
  });

  it("with the transformer, hashes the input's wire form: the same text the browser compares", () => {
    const input = { coupon: undefined, at: new Date(0), tags: new Set(['a']) };
    expect(fingerprintRequest(path, input, superjson)).toBe(
      fingerprintRequest(path, superjson.serialize(input)),
    );
    // superjson sends an undefined property, plain JSON does not: one definition decides both sides.
    expect(canonicalWireForm({ coupon: undefined }, superjson)).not.toBe(canonicalWireForm({}, superjson));
    expect(canonicalWireForm({ coupon: undefined })).toBe(canonicalWireForm({}));
    expect(fingerprintRequest(path, { coupon: undefined }, superjson)).not.toBe(
      fingerprintRequest(path, {}, superjson),
    );
  });
});

describe('canonicalWireForm', () => {
  // What fingerprintRequest (server) and the payload comparison (browser) raise for an input with no JSON form:
  // one TypeError saying so, with the precise reason as its cause.
  it('refuses an input with no JSON form with a TypeError that says so, its reason as the cause', () => {
    let thrown: unknown;
    try {
      canonicalWireForm({ total: Number.NaN });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TypeError);
    expect((thrown as TypeError).message).toBe('The request input cannot be represented as canonical JSON.');
    expect((thrown as TypeError).cause).toEqual(new TypeError('NaN is not JSON'));
  });
});
