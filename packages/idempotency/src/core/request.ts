/**
 * One idempotent request, independent of any API framework, and what the two modes' lifecycles
 * (transactional.ts, external.ts) answer it with. Adapters turn their framework's request into an
 * `IdempotentRequest` and their result into a `RunOutcome`.
 */
import type { ResolvedOptions } from './config.ts';
import { inProgressError, keyReusedError } from './errors.ts';
import { type IdempotencyRecord, RecordState, type StoredResponse } from './record.ts';

export interface IdempotentRequest {
  scope: string;
  procedure: string;
  key: string;
  fingerprint: string;
}

/**
 * What running the procedure produced. `response` is what to store and replay, or null when the result must
 * not be stored (a transient failure or a validation error): then the key is released and a retry runs again.
 */
export interface RunOutcome<TResult> {
  result: TResult;
  response: StoredResponse | null;
}

export type HandledRequest<TResult> =
  /** This request ran the procedure, and its response is stored. */
  | { kind: 'executed'; result: TResult }
  /** This request ran the procedure, which failed in a way that is not stored: the key was released. */
  | { kind: 'released'; result: TResult }
  /** A duplicate: the first request's stored response. */
  | { kind: 'replayed'; response: StoredResponse };

/** The response a duplicate gets, or the 422 / 409 that explains why it gets none. */
export function replayOf(
  record: IdempotencyRecord,
  request: IdempotentRequest,
  options: ResolvedOptions,
): StoredResponse {
  if (record.fingerprint !== request.fingerprint) throw keyReusedError();
  if (record.state === RecordState.completed && record.response) return record.response;
  throw inProgressError(options.retryAfterSeconds);
}
