/**
 * The fingerprint of a plain HTTP request: the route's name, the request target (method, path and query: one
 * key sent to `/orders/7/pay` and then to `/orders/8/pay` is another request, 422) and its body. A JSON body
 * (`application/json`, `…+json`) is fingerprinted as canonical JSON (RFC 8785), so reordered keys and other
 * whitespace are the same request, exactly as on the tRPC adapter; any other body by the SHA-256 of its bytes,
 * hashed as they arrive (`hashBytes`); no body as `null`.
 */
import { createHash, type Hash } from 'node:crypto';
import { IdempotencyError, IdempotencyErrorCode, invalidInputError } from '../core/errors.ts';
import { fingerprintRequest } from '../core/fingerprint.ts';

export type HttpBody =
  | { kind: 'none' }
  /** Already parsed (Express's `express.json()`). */
  | { kind: 'json'; value: unknown }
  /** As received, with its Content-Type (which decides whether it is read as JSON). */
  | { kind: 'bytes'; bytes: Uint8Array; contentType: string | null }
  /** A body that is not JSON, already hashed (`hashBytes`) while it was read: the bytes were not kept. */
  | { kind: 'hashed'; sha256: string; length: number };

/** An incremental SHA-256 of a non-JSON body: `update` each chunk, then `body()`. */
export function hashBytes(): { update(chunk: Uint8Array): void; body(): HttpBody } {
  const hash: Hash = createHash('sha256');
  let length = 0;
  return {
    update(chunk) {
      hash.update(chunk);
      length += chunk.length;
    },
    body: () => ({ kind: 'hashed', sha256: hash.digest('base64url'), length }),
  };
}

export function isJsonContentType(contentType: string | null): boolean {
  if (!contentType) return false;
  const mediaType = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  return mediaType === 'application/json' || mediaType.endsWith('+json');
}

/** Throws IdempotencyError (400) for a body that says it is JSON and is not, or that has no canonical form. */
export function fingerprintHttpRequest(procedure: string, target: string, body: HttpBody): string {
  const input = { target, body: inputOf(body) };
  try {
    return fingerprintRequest(procedure, input);
  } catch {
    throw invalidInputError();
  }
}

/** `{ json }` or `{ sha256 }`, so a JSON body never shares a fingerprint with a binary one. */
function inputOf(body: HttpBody): unknown {
  if (body.kind === 'none') return null;
  if (body.kind === 'json') return { json: body.value };
  if (body.kind === 'hashed') return body.length === 0 ? null : { sha256: body.sha256 };
  if (body.bytes.length === 0) return null;
  if (!isJsonContentType(body.contentType)) {
    const hashed = hashBytes();
    hashed.update(body.bytes);
    return inputOf(hashed.body());
  }
  try {
    return { json: JSON.parse(new TextDecoder().decode(body.bytes)) as unknown };
  } catch {
    throw new IdempotencyError(
      IdempotencyErrorCode.invalidInput,
      'The request body is not valid JSON although its Content-Type says it is, so it cannot be fingerprinted ' +
        'for its Idempotency-Key.',
    );
  }
}
