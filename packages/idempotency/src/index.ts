/** @idem/idempotency — the framework-free core. Adapters: `@idem/idempotency/trpc`, `@idem/idempotency/prisma`. */
export {
  DEFAULT_OPTIONS,
  DEFAULT_STORED_ERROR_CODES,
  IdempotencyMode,
  type IdempotencyOptions,
  type ResolvedOptions,
  resolveOptions,
} from './core/config.ts';
export {
  batchedError,
  IDEMPOTENCY_KEY_HEADER,
  IdempotencyError,
  IdempotencyErrorCode,
  inProgressError,
  invalidInputError,
  keyReusedError,
  leaseLostError,
  malformedKeyError,
  missingKeyError,
  streamedError,
  tooManyInFlightError,
  UnstableScope,
  unstableScope,
  unstableScopeError,
} from './core/errors.ts';
export { fingerprintRequest } from './core/fingerprint.ts';
export {
  type FaultHooks,
  type HandledRequest,
  handleExternal,
  handleTransactional,
  type IdempotentRequest,
  type RunOutcome,
} from './core/handler.ts';
export { MAX_KEY_LENGTH, parseIdempotencyKey } from './core/key.ts';
export {
  type IdempotencyRecord,
  type JsonValue,
  type RecordKey,
  RecordState,
  RequestOutcome,
  type StoredResponse,
} from './core/record.ts';
export type { ClaimRequest, ClaimResult, IdempotencyStore, TransactionOptions } from './core/store.ts';
export { canonicalWireForm, plainJsonWire, type WireTransformer } from './core/wire-form.ts';
