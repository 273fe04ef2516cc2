/**
 * @idem/idempotency/client — browser-safe helpers for a tRPC client: the `Idempotency-Key` header, a retry
 * link that re-sends keyed mutations with the same key, and the retry policy as pure functions.
 * Imports nothing from the server half (`../core`, `../trpc`) and no `node:*` module; the header names and the
 * key rule come from `../protocol.ts`, which the server half uses too.
 */

export type { IdempotentProcedurePath } from '../idempotent-procedure.ts';
export {
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  isValidIdempotencyKey,
  MAX_KEY_LENGTH,
  RETRY_AFTER_HEADER,
} from '../protocol.ts';
export {
  DEFAULT_BASE_DELAY_MS,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_DELAY_MS,
  DEFAULT_MAX_RETRY_AFTER_MS,
} from './constants.ts';
export {
  getIdempotencyKey,
  getIdempotencyObserver,
  type IdempotencyObserver,
  isReplayedResponse,
  type KeyedMutationContext,
  type RetryLinkEvent,
} from './context.ts';
export { idempotencyHeaders, type OperationLike } from './headers.ts';
export { createIdempotencyKey } from './key.ts';
export { abortableSleep, type IdempotentRetryLinkOptions, idempotentRetryLink } from './link.ts';
export { MissingIdempotencyKeyError } from './missing-key-error.ts';
export {
  IdempotencyOutcomeUnknownError,
  isIdempotencyOutcomeUnknown,
  type OutcomeUnknownClientError,
  type OutcomeUnknownDetails,
} from './outcome-unknown-error.ts';
export {
  type BackoffOptions,
  backoffDelayMs,
  classifyFailure,
  type FailureClass,
  httpStatusOf,
  isAbortError,
  isNetworkError,
  parseRetryAfter,
  type RetryReason,
  retryReasonOf,
} from './retry-policy.ts';
