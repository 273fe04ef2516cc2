/**
 * core/canonical-json.ts against the `canonicalize` package (RFC 8785's reference implementation for npm): the
 * same text for every JSON value, so fingerprints stored before the switch stay valid; and the same refusals.
 */
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../src/core/canonical-json.ts';

const withUndefined = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.jsonValue(),
    fc.constant(undefined),
    fc.date({ noInvalidDate: true }),
    fc.array(tie('value')),
    fc.dictionary(fc.string(), tie('value')),
  ),
})).value;

describe('canonicalJson', () => {
  it('writes what canonicalize writes, for any JSON value (also with undefined, Dates, odd keys)', () => {
    fc.assert(
      fc.property(withUndefined, (value) => {
        expect(canonicalJson(value)).toBe(canonicalize(value));
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses exactly the strings canonicalize refuses (lone surrogates), and writes the rest alike', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        let expected: string | undefined;
        try {
          expected = canonicalize({ [text]: text });
        } catch {
          expect(() => canonicalJson({ [text]: text })).toThrow(TypeError);
          return;
        }
        expect(canonicalJson({ [text]: text })).toBe(expected);
      }),
      { numRuns: 2_000 },
    );
  });

  it('sorts keys by UTF-16 code units and writes numbers as ECMAScript does', () => {
    expect(canonicalJson({ b: 1, a: [1e21, 0.1, -0], '\u{1F600}': true, '\uFFFF': null })).toBe(
      '{"a":[1e+21,0.1,0],"b":1,"\u{1F600}":true,"\uFFFF":null}',
    );
  });

  it('refuses what has no JSON form instead of writing something else', () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson([Number.POSITIVE_INFINITY])).toThrow(TypeError);
    expect(() => canonicalJson({ s: '\uD800' })).toThrow(TypeError);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => canonicalJson(cycle)).toThrow(RangeError);
  });

  // What it refuses, it says: the message names the value (it becomes the cause of the wire form's TypeError,
  // which is what a developer sees for an input the layer cannot fingerprint).
  it('says what it refused: the number, or a lone surrogate', () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(new TypeError('NaN is not JSON'));
    expect(() => canonicalJson([Number.NEGATIVE_INFINITY])).toThrow(new TypeError('-Infinity is not JSON'));
    expect(() => canonicalJson('a\uDC00')).toThrow(new TypeError('A lone surrogate is not JSON'));
  });

  // Like JSON.stringify (and canonicalize): a boxed primitive is written as its value, not as an object.
  it('writes a boxed number, string or boolean as its value', () => {
    const boxed = { n: Object(1.5), s: Object('ab'), b: Object(false) };
    expect(canonicalJson(boxed)).toBe('{"b":false,"n":1.5,"s":"ab"}');
    expect(canonicalJson(boxed)).toBe(canonicalize(boxed));
    expect(canonicalJson([Object(0), Object('')])).toBe('[0,""]');
  });

  // Like JSON.stringify: only a toJSON *function* is called; any other toJSON is a property like the rest.
  it('takes a toJSON that is not a function as a plain property', () => {
    const value = { toJSON: 'not a function', a: 1 };
    expect(canonicalJson(value)).toBe('{"a":1,"toJSON":"not a function"}');
    expect(canonicalJson(value)).toBe(JSON.stringify({ a: 1, toJSON: 'not a function' }));
  });
});
