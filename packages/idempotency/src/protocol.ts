/**
 * The wire contract both halves share: header names and the rule a key must follow. Dependency-free (no
 * `node:*`, no package), so the browser half (`./client`) and the server half (`./core`) import the same
 * definitions.
 */

/** The request header that carries the client's key. */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
/** Set to `true` on a response that is a stored result of an earlier request with the same key. */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';
/** Sent with a 409 or a 429: whole seconds to wait before retrying with the same key. */
export const RETRY_AFTER_HEADER = 'Retry-After';

/** The longest key the server accepts. */
export const MAX_KEY_LENGTH = 255;

const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** True when every character of `value` is printable ASCII (what a header value may hold). */
export function isPrintableAscii(value: string): boolean {
  return PRINTABLE_ASCII.test(value);
}

/** True for a key the server accepts: 1 to `MAX_KEY_LENGTH` printable ASCII characters. */
export function isValidIdempotencyKey(key: string): boolean {
  // The pattern needs at least one character.
  return key.length <= MAX_KEY_LENGTH && isPrintableAscii(key);
}
