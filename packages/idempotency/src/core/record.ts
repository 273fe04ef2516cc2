/** What the store keeps per (scope, procedure, key). */

export const RecordState = {
  /** Claimed; the procedure is running (external mode: under a lease). */
  processing: 'processing',
  /** Finished with a stored response that every duplicate gets back. */
  completed: 'completed',
} as const;
export type RecordState = (typeof RecordState)[keyof typeof RecordState];

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * What the plain HTTP adapters (./fetch, ./express) keep of a response beyond its status: the headers that are
 * replayed (lower-case names) and how `body` encodes the bytes. The tRPC adapter stores none of it.
 */
export interface StoredHttpParts {
  headers?: { [name: string]: string };
  /** `base64` for a body that is not valid UTF-8; absent: `body` is the UTF-8 text of the bytes. */
  bodyEncoding?: 'base64';
}

/** The response to replay, exactly as the first request produced it. */
export type StoredResponse =
  | ({
      kind: 'output';
      httpStatus: number;
      /**
       * tRPC: the output serialized by the API's transformer, as JSON text (text, not jsonb: key order is kept).
       * Plain HTTP: the response body (see `bodyEncoding`).
       */
      body: string;
    } & StoredHttpParts)
  | ({
      kind: 'error';
      httpStatus: number;
      /** The API's error code, e.g. tRPC's PAYMENT_REQUIRED. */
      code: string;
      message: string;
      /** JSON-safe own properties of the error's cause (e.g. a business `reason`), so a replay explains itself. */
      cause?: { [key: string]: JsonValue };
      /** Plain HTTP: the error response's body, replayed byte for byte (see `bodyEncoding`). */
      body?: string;
    } & StoredHttpParts);

export interface RecordKey {
  /** Whose key: the principal, from the server's context, never from the client. */
  scope: string;
  /** The procedure path, e.g. `payments.charge`. */
  procedure: string;
  key: string;
}

/**
 * One string per key, for in-process maps: the three parts as a JSON array, so no separator a scope or key could
 * contain can make two keys one.
 */
export function recordKeyId(key: RecordKey): string {
  return JSON.stringify([key.scope, key.procedure, key.key]);
}

export interface IdempotencyRecord extends RecordKey {
  fingerprint: string;
  state: RecordState;
  response: StoredResponse | null;
  leaseOwner: string | null;
  /** Computed by the database (its now(), not the app's clock). */
  leaseActive: boolean;
  createdAt: Date;
  expiresAt: Date;
  replayCount: number;
}

/** How a request ended, for logs and metrics (`idem_requests_total{outcome}`). */
export const RequestOutcome = {
  executed: 'executed',
  replayed: 'replayed',
  conflict: 'conflict',
  mismatch: 'mismatch',
  rejected: 'rejected',
  released: 'released',
  /** No key, and `missingKey: 'passthrough'`: the procedure ran unprotected. */
  unkeyed: 'unkeyed',
} as const;
export type RequestOutcome = (typeof RequestOutcome)[keyof typeof RequestOutcome];
