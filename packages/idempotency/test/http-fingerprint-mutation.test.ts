/**
 * The plain HTTP fingerprint (src/http/fingerprint.ts), pinned exactly: what each kind of body becomes in the
 * fingerprinted input (`null`, `{ json }` or `{ sha256 }` of the bytes, base64url), which Content-Types are
 * read as JSON, and the two 400s (a JSON body that does not parse, an input with no canonical form).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IdempotencyError, IdempotencyErrorCode } from '../src/core/errors.ts';
import { fingerprintRequest } from '../src/core/fingerprint.ts';
import { fingerprintHttpRequest, hashBytes, isJsonContentType } from '../src/http/fingerprint.ts';

const ROUTE = 'orders.create';
const TARGET = 'POST /orders?x=1';
const bytes = (text: string) => new TextEncoder().encode(text);
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('base64url');
/** The fingerprint of the request whose body is fingerprinted as `body`. */
const expected = (body: unknown) => fingerprintRequest(ROUTE, { target: TARGET, body });

describe('hashBytes', () => {
  it('hashes the chunks as one byte string (base64url SHA-256) and counts their bytes', () => {
    const hashed = hashBytes();
    hashed.update(bytes('hello, '));
    hashed.update(new Uint8Array([0xff, 0x00]));
    hashed.update(bytes('world'));
    const all = new Uint8Array([...bytes('hello, '), 0xff, 0x00, ...bytes('world')]);
    expect(hashed.body()).toEqual({ kind: 'hashed', sha256: sha256(all), length: 14 });
  });

  it('no chunk: length 0, the hash of nothing', () => {
    expect(hashBytes().body()).toEqual({ kind: 'hashed', sha256: sha256(new Uint8Array()), length: 0 });
  });
});

describe('isJsonContentType', () => {
  it.each([
    ['application/json', true],
    ['application/json; charset=utf-8', true],
    ['  Application/JSON  ; charset=utf-8', true],
    ['application/problem+json', true],
    ['application/vnd.order+JSON;v=2', true],
    ['text/plain', false],
    ['application/jsonx', false],
    ['application/json-patch', false],
    ['text/plain; note=application/json', false],
    ['application/octet-stream; x=+json', false],
    ['', false],
    [null, false],
  ])('%j → %s', (contentType, json) => {
    expect(isJsonContentType(contentType)).toBe(json);
  });
});

describe('fingerprintHttpRequest: what each body becomes', () => {
  it('no body, an empty body of any type, an empty hashed body: null', () => {
    const none = expected(null);
    expect(fingerprintHttpRequest(ROUTE, TARGET, { kind: 'none' })).toBe(none);
    for (const contentType of ['application/json', 'text/plain', null])
      expect(
        fingerprintHttpRequest(ROUTE, TARGET, { kind: 'bytes', bytes: new Uint8Array(), contentType }),
      ).toBe(none);
    expect(fingerprintHttpRequest(ROUTE, TARGET, hashBytes().body())).toBe(none);
  });

  it('a parsed JSON value and JSON bytes: { json: value }, canonical (key order and spacing do not count)', () => {
    const value = { sku: 'book', quantity: 1 };
    expect(fingerprintHttpRequest(ROUTE, TARGET, { kind: 'json', value })).toBe(expected({ json: value }));
    expect(
      fingerprintHttpRequest(ROUTE, TARGET, {
        kind: 'bytes',
        bytes: bytes('{ "quantity": 1,\n "sku": "book" }'),
        contentType: 'application/merge-patch+json',
      }),
    ).toBe(expected({ json: value }));
  });

  it('bytes that are not JSON by their type: { sha256 } of the bytes, as if hashed while read', () => {
    const body = bytes('{"sku":"book"}');
    const asText = fingerprintHttpRequest(ROUTE, TARGET, {
      kind: 'bytes',
      bytes: body,
      contentType: 'text/plain',
    });
    expect(asText).toBe(expected({ sha256: sha256(body) }));
    expect(fingerprintHttpRequest(ROUTE, TARGET, { kind: 'bytes', bytes: body, contentType: null })).toBe(
      asText,
    );
    const hashed = hashBytes();
    hashed.update(body);
    expect(fingerprintHttpRequest(ROUTE, TARGET, hashed.body())).toBe(asText);
    // The same bytes as JSON are another request: a JSON body never shares a fingerprint with a binary one.
    expect(
      fingerprintHttpRequest(ROUTE, TARGET, { kind: 'bytes', bytes: body, contentType: 'application/json' }),
    ).not.toBe(asText);
  });

  it('the route name and the target are part of it', () => {
    const body = { kind: 'json', value: 1 } as const;
    expect(fingerprintHttpRequest(ROUTE, TARGET, body)).not.toBe(
      fingerprintHttpRequest('other', TARGET, body),
    );
    expect(fingerprintHttpRequest(ROUTE, TARGET, body)).not.toBe(
      fingerprintHttpRequest(ROUTE, 'POST /orders?x=2', body),
    );
  });

  it('a body that says JSON and does not parse → 400 idempotency_input_invalid naming the Content-Type', () => {
    const fingerprint = () =>
      fingerprintHttpRequest(ROUTE, TARGET, {
        kind: 'bytes',
        bytes: bytes('{"sku":'),
        contentType: 'application/json',
      });
    expect(fingerprint).toThrow(IdempotencyError);
    expect(fingerprint).toThrow(
      'The request body is not valid JSON although its Content-Type says it is, so it cannot be fingerprinted ' +
        'for its Idempotency-Key.',
    );
    try {
      fingerprint();
    } catch (error) {
      expect(error).toMatchObject({ code: IdempotencyErrorCode.invalidInput, httpStatus: 400 });
    }
  });

  it('a JSON value with no canonical form (a lone surrogate) → 400 idempotency_input_invalid', () => {
    const fingerprint = () =>
      fingerprintHttpRequest(ROUTE, TARGET, {
        kind: 'bytes',
        bytes: bytes('"\\ud800"'),
        contentType: 'application/json',
      });
    expect(fingerprint).toThrow(IdempotencyError);
    expect(fingerprint).toThrow(/cannot be fingerprinted for its Idempotency-Key: it is nested too deeply/);
    try {
      fingerprint();
    } catch (error) {
      expect(error).toMatchObject({ code: IdempotencyErrorCode.invalidInput, httpStatus: 400 });
    }
  });
});
