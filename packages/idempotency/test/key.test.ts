import { describe, expect, it } from 'vitest';
import {
  IdempotencyError,
  IdempotencyErrorCode,
  isValidIdempotencyKey,
  MAX_KEY_LENGTH,
  parseIdempotencyKey,
} from '../src/index.ts';

const uuid = '8e03978e-40d5-43e8-bc93-6894a57f9324';

/** Runs the parser and returns the IdempotencyError it throws (fails the test if it does not throw one). */
function rejection(value: string | null | undefined): IdempotencyError {
  try {
    parseIdempotencyKey(value);
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyError);
    return error as IdempotencyError;
  }
  throw new Error(`expected ${JSON.stringify(value)} to be rejected`);
}

describe('parseIdempotencyKey: accepted values', () => {
  it.each([
    ['a bare UUID', uuid, uuid],
    ['the same UUID as a quoted sf-string', `"${uuid}"`, uuid],
    ['surrounding whitespace (trimmed)', `  ${uuid}\t`, uuid],
    ['a quoted sf-string with surrounding whitespace', ` "${uuid}" `, uuid],
    ['a single character', 'x', 'x'],
    ['an sf-string with escapes', String.raw`"a\"b\\c"`, String.raw`a"b\c`],
    ['an sf-string containing a comma (one string, not a list)', '"a,b"', 'a,b'],
    ['inner spaces and symbols', 'order 42: #1 ~ok~', 'order 42: #1 ~ok~'],
    // The contract also accepts bare values, and a bare value cannot be told apart from an sf token or
    // integer: those are taken literally, as the bare key.
    ['an sf-token-looking bare value (taken literally)', 'abc', 'abc'],
    ['an sf-integer-looking bare value (taken literally)', '42', '42'],
  ])('%s', (_name, header, key) => {
    expect(parseIdempotencyKey(header)).toBe(key);
  });

  it('the quoted form and the bare form give the same key', () => {
    expect(parseIdempotencyKey(`"${uuid}"`)).toBe(parseIdempotencyKey(uuid));
  });

  it(`accepts exactly ${MAX_KEY_LENGTH} characters, bare or quoted, and rejects ${MAX_KEY_LENGTH + 1}`, () => {
    expect(MAX_KEY_LENGTH).toBe(255);
    const max = 'k'.repeat(255);
    expect(parseIdempotencyKey(max)).toBe(max);
    expect(parseIdempotencyKey(`"${max}"`)).toBe(max);
    for (const tooLong of ['k'.repeat(256), `"${'k'.repeat(256)}"`]) {
      const error = rejection(tooLong);
      expect(error.code).toBe(IdempotencyErrorCode.malformedKey);
      expect(error.httpStatus).toBe(400);
      expect(error.message).toMatch(/256 characters/);
    }
  });
});

describe('parseIdempotencyKey: rejected values', () => {
  it.each([
    ['empty', ''],
    ['whitespace only', '   '],
    ['tab only', '\t'],
    ['an empty sf-string', '""'],
    ['non-ASCII (bare)', 'clé-à-molette'],
    ['non-ASCII (emoji)', 'key-🔑'],
    ['non-ASCII inside an sf-string', '"clé"'],
    ['a NUL character', 'a\u0000b'],
    ['a newline inside', 'a\nb'],
    ['a tab inside', 'a\tb'],
    ['DEL (0x7f)', 'a\u007fb'],
    ['a control character inside an sf-string', '"a\u0001b"'],
    ['a folded list of bare values', 'a, b'],
    ['a folded list without a space', 'a,b'],
    ['a folded repeated UUID', `${uuid}, ${uuid}`],
    ['an sf list of strings', '"a", "b"'],
    ['an sf list, first quoted, then bare', '"a", b'],
    ['a list, first bare, then quoted', 'a, "b"'],
    ['an sf-string with a parameter', '"a";x=1'],
    ['an sf-string with a boolean parameter', '"a";x'],
    ['an unterminated sf-string', '"abc'],
    ['an sf-string followed by garbage', '"abc"def'],
    ['an sf-string with an invalid escape', String.raw`"a\xb"`],
  ])('%s → 400 malformed', (_name, header) => {
    const error = rejection(header);
    expect(error.name).toBe('IdempotencyError');
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe(IdempotencyErrorCode.malformedKey);
    expect(error.code).toBe('idempotency_key_malformed');
    expect(error.httpStatus).toBe(400);
    expect(error.retryAfterSeconds).toBeUndefined();
    expect(error.message).toMatch(/Idempotency-Key/);
  });

  // The reason is the part of the message that tells the client what it did wrong.
  it.each([
    ['empty', '', /: it is empty\./],
    ['whitespace only', ' \t ', /: it is empty\./],
    ['an empty sf-string', '""', /: it is empty\./],
    ['too long', 'k'.repeat(300), /: it is 300 characters long\./],
    ['non-ASCII', 'clé', /: it contains non-printable or non-ASCII characters\./],
    ['a folded list of bare values', 'a, b', /: it is a list \(was the header sent twice\?\)\./],
    ['an sf list', '"a", "b"', /: it is not a single quoted string \(was the header sent twice\?\)\./],
    ['an sf-string with a parameter', '"a";x=1', /: parameters are not allowed\./],
  ])('%s: the message gives its own reason and what to send instead', (_name, header, reason) => {
    const { message } = rejection(header);
    expect(message).toMatch(reason);
    expect(message).toMatch(/^The Idempotency-Key header is malformed: /);
    expect(message).toMatch(/ Send 1–255 printable ASCII characters\.$/);
  });

  it.each([
    ['null', null],
    ['undefined', undefined],
  ])('%s → 400 missing (not malformed)', (_name, header) => {
    const error = rejection(header);
    expect(error.code).toBe(IdempotencyErrorCode.missingKey);
    expect(error.code).toBe('idempotency_key_missing');
    expect(error.httpStatus).toBe(400);
    expect(error.message).toBe(
      'This operation requires an Idempotency-Key header (a UUID per intent, reused on every retry).',
    );
  });

  it('a header set twice reaches the parser folded into a list, and is rejected', () => {
    const headers = new Headers();
    headers.append('Idempotency-Key', uuid);
    headers.append('Idempotency-Key', uuid);
    expect(rejection(headers.get('Idempotency-Key')).code).toBe(IdempotencyErrorCode.malformedKey);
    // Control: sent once, the same value is fine.
    expect(parseIdempotencyKey(new Headers({ 'Idempotency-Key': uuid }).get('Idempotency-Key'))).toBe(uuid);
    // Absent: Headers.get gives null → missing.
    expect(rejection(new Headers().get('Idempotency-Key')).code).toBe(IdempotencyErrorCode.missingKey);
  });
});

// The browser's check (the retry link, the intent store) must accept exactly what the server's parser accepts:
// a key it passes that the server refuses would be re-sent in vain; one it refuses the server takes is lost.
describe('isValidIdempotencyKey: the same rule as the server', () => {
  it(`accepts 1 to ${MAX_KEY_LENGTH} printable ASCII characters, like parseIdempotencyKey`, () => {
    for (const key of ['x', uuid, 'order 42: #1 ~ok~', 'k'.repeat(255)]) {
      expect(isValidIdempotencyKey(key)).toBe(true);
      expect(parseIdempotencyKey(key)).toBe(key);
    }
  });

  it(`refuses an empty key, ${MAX_KEY_LENGTH + 1} characters, or a non-printable or non-ASCII one`, () => {
    for (const key of ['', 'k'.repeat(256), 'clé', 'a\nb', 'a\u007fb']) {
      expect(isValidIdempotencyKey(key)).toBe(false);
      expect(rejection(key).code).toBe(IdempotencyErrorCode.malformedKey);
    }
  });
});
