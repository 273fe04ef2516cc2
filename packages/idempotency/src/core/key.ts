/**
 * Parsing the Idempotency-Key header. The IETF draft defines it as a Structured Field String (RFC 9651), e.g.
 * `Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`; Stripe and most clients send the bare value.
 * Both are accepted. Lists (a repeated header is folded into "a, b"), parameters and empty values are not.
 */
import { parseItem } from 'structured-headers';
import { isPrintableAscii, MAX_KEY_LENGTH } from '../protocol.ts';
import { malformedKeyError, missingKeyError } from './errors.ts';

/** The key in a header value; throws IdempotencyError (400) when missing or malformed. */
export function parseIdempotencyKey(headerValue: string | null | undefined): string {
  if (headerValue === null || headerValue === undefined) throw missingKeyError();
  const trimmed = headerValue.trim();
  const key = trimmed.startsWith('"') ? parseStructuredString(trimmed) : trimmed;
  // One check for both empty forms: a blank header and an empty sf-string ("").
  if (key.length === 0) throw malformedKeyError('it is empty');
  if (key.length > MAX_KEY_LENGTH) throw malformedKeyError(`it is ${key.length} characters long`);
  if (!isPrintableAscii(key)) throw malformedKeyError('it contains non-printable or non-ASCII characters');
  if (!trimmed.startsWith('"') && key.includes(',')) {
    throw malformedKeyError('it is a list (was the header sent twice?)');
  }
  return key;
}

function parseStructuredString(value: string): string {
  let item: ReturnType<typeof parseItem>;
  try {
    item = parseItem(value);
  } catch {
    throw malformedKeyError('it is not a single quoted string (was the header sent twice?)');
  }
  const [bareItem, parameters] = item;
  // A value that starts with a quote parses as a string or not at all; the check narrows the type.
  if (typeof bareItem !== 'string') throw malformedKeyError('it is not a string');
  if (parameters.size > 0) throw malformedKeyError('parameters are not allowed');
  return bareItem;
}
