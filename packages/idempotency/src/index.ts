/**
 * @idem/idempotency — the framework-free core: the wire contract, options, the one error class, the request
 * store interface. (The request lifecycles behind every adapter are `src/core/transactional.ts` and
 * `src/core/external.ts`.) Adapters: `@idem/idempotency/trpc`, `@idem/idempotency/prisma`.
 */
export {
  DEFAULT_OPTIONS,
  DEFAULT_STORED_ERROR_CODES,
  IdempotencyMode,
  type IdempotencyOptions,
  type MissingKeyPolicy,
} from './core/config.ts';
export {
  IDEMPOTENCY_REQUEST_CHANNEL,
  IDEMPOTENCY_STEP_CHANNELS,
  type IdempotencyRequestTrace,
  IdempotencyStep,
  type IdempotencyStepMessage,
} from './core/diagnostics.ts';
export {
  IdempotencyError,
  IdempotencyErrorCode,
  IdempotencyStoreSetupError,
  TransactionLostError,
  UnstableScope,
  unstableScope,
} from './core/errors.ts';
export { fingerprintRequest } from './core/fingerprint.ts';
export { parseIdempotencyKey } from './core/key.ts';
export {
  type IdempotencyRecord,
  type JsonValue,
  type RecordKey,
  RecordState,
  RequestOutcome,
  type StoredResponse,
} from './core/record.ts';
export { createReplayCache, type ReplayCache, type ReplayCacheOptions } from './core/replay-cache.ts';
export {
  ENCRYPTED_BODY_PREFIX,
  encryptStoredResponses,
  type ResponseEncryptionOptions,
} from './core/response-encryption.ts';
export type { ClaimRequest, ClaimResult, IdempotencyStore, TransactionOptions } from './core/store.ts';
export { canonicalWireForm, plainJsonWire, type WireTransformer } from './core/wire-form.ts';
export {
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  isValidIdempotencyKey,
  MAX_KEY_LENGTH,
  RETRY_AFTER_HEADER,
} from './protocol.ts';
