/** What the store keeps per (scope, procedure, key). */

export const RecordState = {
  /** Claimed; the procedure is running (external mode: under a lease). */
  processing: 'processing',
  /** Finished with a stored response that every duplicate gets back. */
  completed: 'completed',
} as const;
export type RecordState = (typeof RecordState)[keyof typeof RecordState];

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** The response to replay, exactly as the first request produced it. */
export type StoredResponse =
  | {
      kind: 'output';
      httpStatus: number;
      /** The output serialized by the API's transformer, as JSON text (text, not jsonb: key order is kept). */
      body: string;
    }
  | {
      kind: 'error';
      httpStatus: number;
      /** The API's error code, e.g. tRPC's PAYMENT_REQUIRED. */
      code: string;
      message: string;
      /** JSON-safe own properties of the error's cause (e.g. a business `reason`), so a replay explains itself. */
      cause?: { [key: string]: JsonValue };
    };

export interface RecordKey {
  /** Whose key: the principal, from the server's context, never from the client. */
  scope: string;
  /** The procedure path, e.g. `payments.charge`. */
  procedure: string;
  key: string;
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
