/**
 * Every failure the idempotency layer itself produces: one base class, a stable machine-readable `code`, and
 * the HTTP status the contract gives it. Adapters (tRPC) map these to their own error types.
 */
import { IDEMPOTENCY_KEY_HEADER, MAX_KEY_LENGTH } from '../protocol.ts';
export const IdempotencyErrorCode = {
  /** The procedure requires an Idempotency-Key and none was sent. 400. */
  missingKey: 'idempotency_key_missing',
  /** The header is empty, too long, not printable ASCII, or a list. 400. */
  malformedKey: 'idempotency_key_malformed',
  /** An idempotent mutation arrived inside a batch with other operations. 400. */
  batched: 'idempotency_batched_request',
  /** The same key is still being processed by another request. 409 + Retry-After. */
  inProgress: 'idempotency_request_in_progress',
  /** This request's claim was taken over (its lease expired) before it finished. 409 + Retry-After. */
  leaseLost: 'idempotency_lease_lost',
  /** The key was first used with a different request. 422. */
  keyReused: 'idempotency_key_reused',
  /** The input cannot be fingerprinted (nested too deeply, a string that is not valid Unicode). 400. */
  invalidInput: 'idempotency_input_invalid',
  /** The principal already has `maxInFlightPerScope` keys in flight; this new key was not claimed. 429. */
  tooManyInFlight: 'idempotency_too_many_in_flight',
  /**
   * The request's principal will not be the same on a retry (e.g. a guest session created by this very
   * request), so its key could never deduplicate anything. `getScope` returned `unstableScope(…)`. 400.
   */
  unstableScope: 'idempotency_scope_unstable',
  /**
   * An idempotent mutation on a streamed response (tRPC `httpBatchStreamLink`, `trpc-accept: application/jsonl`):
   * its status and headers are sent before the result, so a replay, a 409 or a 422 could not be told apart. 400.
   */
  streamed: 'idempotency_streamed_response',
  /** A plain-HTTP body longer than the route's `maxBodyBytes`: refused before it is read whole. 413. */
  bodyTooLarge: 'idempotency_body_too_large',
  /**
   * Transactional mode: the database could not open the request's transaction (no pooled connection within the
   * wait, the database unreachable). Nothing was claimed or run; retry with the same key. 503 + Retry-After.
   */
  storeUnavailable: 'idempotency_store_unavailable',
} as const;
export type IdempotencyErrorCode = (typeof IdempotencyErrorCode)[keyof typeof IdempotencyErrorCode];

export type IdempotencyHttpStatus = 400 | 409 | 413 | 422 | 429 | 503;

const httpStatusByCode: Record<IdempotencyErrorCode, IdempotencyHttpStatus> = {
  idempotency_key_missing: 400,
  idempotency_key_malformed: 400,
  idempotency_batched_request: 400,
  idempotency_input_invalid: 400,
  idempotency_request_in_progress: 409,
  idempotency_lease_lost: 409,
  idempotency_key_reused: 422,
  idempotency_too_many_in_flight: 429,
  idempotency_scope_unstable: 400,
  idempotency_streamed_response: 400,
  idempotency_body_too_large: 413,
  idempotency_store_unavailable: 503,
};

export class IdempotencyError extends Error {
  override name = 'IdempotencyError';
  readonly httpStatus: IdempotencyHttpStatus;
  constructor(
    readonly code: IdempotencyErrorCode,
    message: string,
    /** Seconds a client should wait before retrying (409, 429 and 503). */
    readonly retryAfterSeconds?: number,
    options?: { cause: unknown },
  ) {
    super(message, options);
    this.httpStatus = httpStatusByCode[code];
  }
}

export function missingKeyError(): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.missingKey,
    `This operation requires an ${IDEMPOTENCY_KEY_HEADER} header (a UUID per intent, reused on every retry).`,
  );
}

export function malformedKeyError(reason: string): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.malformedKey,
    `The ${IDEMPOTENCY_KEY_HEADER} header is malformed: ${reason}. Send 1–${MAX_KEY_LENGTH} printable ASCII characters.`,
  );
}

export function batchedError(): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.batched,
    'An idempotent mutation must be sent alone, not in a batch: its Idempotency-Key belongs to one operation.',
  );
}

export function invalidInputError(): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.invalidInput,
    'The request input cannot be fingerprinted for its Idempotency-Key: it is nested too deeply or holds a string ' +
      'that is not valid Unicode (e.g. a lone surrogate).',
  );
}

export function inProgressError(retryAfterSeconds: number): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.inProgress,
    'A request with this Idempotency-Key is still being processed. Retry after a moment with the same key.',
    retryAfterSeconds,
  );
}

export function leaseLostError(retryAfterSeconds: number): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.leaseLost,
    'This request took too long and another attempt with the same Idempotency-Key took over. Retry with the same key.',
    retryAfterSeconds,
  );
}

export function keyReusedError(): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.keyReused,
    'This Idempotency-Key was already used with a different request. Use a new key for a new request.',
  );
}

export function tooManyInFlightError(maxInFlight: number, retryAfterSeconds: number): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.tooManyInFlight,
    `Too many requests in progress: at most ${maxInFlight} Idempotency-Keys may be in flight at once for one caller. ` +
      'Nothing was done; retry after a moment (the same key is fine).',
    retryAfterSeconds,
  );
}

/**
 * What `getScope` returns for a request that has a principal, but one a retry will not have: for example a
 * guest session the server created for this very request (a client that keeps no cookies gets a new one each
 * time). `howToFix` tells the client what to send instead; the request is refused with 400 and nothing is claimed.
 */
export class UnstableScope {
  constructor(readonly howToFix: string) {}
}

export function unstableScope(howToFix: string): UnstableScope {
  return new UnstableScope(howToFix);
}

export function unstableScopeError(howToFix: string): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.unstableScope,
    `This request has no stable principal for its ${IDEMPOTENCY_KEY_HEADER}, so a retry could not be recognised ` +
      `and nothing was done. ${howToFix}`,
  );
}

export function streamedError(): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.streamed,
    'An idempotent mutation cannot be sent on a streamed response (trpc-accept: application/jsonl, ' +
      'httpBatchStreamLink): its status and headers (Idempotent-Replayed, Retry-After) are sent before the result. ' +
      'Nothing was done; send it without trpc-accept (httpLink).',
  );
}

export function bodyTooLargeError(maxBodyBytes: number): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.bodyTooLarge,
    `The request body is larger than this route accepts (${maxBodyBytes} bytes). Nothing was done.`,
  );
}

/** `cause`: the database's own error, for the server's logs (never for the client). */
export function storeUnavailableError(retryAfterSeconds: number, cause: unknown): IdempotencyError {
  return new IdempotencyError(
    IdempotencyErrorCode.storeUnavailable,
    'The service could not take this request now. Nothing was done; retry after a moment with the same key.',
    retryAfterSeconds,
    { cause },
  );
}

/**
 * The store is not set up for this database (its table is missing): a server fault, never the client's. The
 * tRPC adapter answers it as a plain 500 and keeps this error, with its how-to-fix message, as the cause that
 * the server's `onError` logs.
 */
export class IdempotencyStoreSetupError extends Error {
  override readonly name: string = 'IdempotencyStoreSetupError';
}

/**
 * The transaction that claimed the key is gone before its COMMIT: its completion matched no row, or (a claim
 * written completed) the store found no transaction open. The database ended it under the procedure — InnoDB
 * rolls a deadlock victim back whole, the claim with it, and the session goes on outside any transaction. Its
 * COMMIT would commit nothing, so the request fails instead of answering (and, with `rememberCommitted`,
 * remembering) a response that is not stored. A server fault: a retry with the same key runs again.
 */
export class TransactionLostError extends Error {
  override readonly name = 'TransactionLostError';

  constructor() {
    super(
      'The transaction that claimed the idempotency key ended before its COMMIT (a deadlock victim whose error ' +
        'the procedure caught?): nothing of it is stored.',
    );
  }
}
