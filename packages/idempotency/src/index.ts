/**
 * @idem/idempotency — the framework-free core: the wire contract, options, the one error class, the request
 * lifecycle and the store interface. Adapters: `@idem/idempotency/trpc`, `@idem/idempotency/prisma`.
 */
export {
  DEFAULT_OPTIONS,
  DEFAULT_STORED_ERROR_CODES,
  IdempotencyMode,
  type IdempotencyOptions,
  type MissingKeyPolicy,
  type ResolvedOptions,
  resolveOptions,
} from './core/config.ts';
export {
  IdempotencyError,
  IdempotencyErrorCode,
  IdempotencyStoreSetupError,
  UnstableScope,
  unstableScope,
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
export { parseIdempotencyKey } from './core/key.ts';
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
export {
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  isValidIdempotencyKey,
  MAX_KEY_LENGTH,
  RETRY_AFTER_HEADER,
} from './protocol.ts';
