/**
 * @idem/idempotency/react — React hooks for keyed, retry-safe tRPC mutations (TanStack Query +
 * @trpc/tanstack-react-query). Browser-safe and SSR-safe: no `node:*`, nothing from the server half, no
 * storage access during render.
 */
export type { WireTransformer } from '../core/wire-form.ts';
export type { KeyValueStorage } from './intent-store.ts';
export {
  jsonSerializer,
  type PayloadSerializer,
  payloadEquals,
  transformerSerializer,
} from './payload.ts';
export {
  DEFAULT_MAX_INTENT_AGE_MS,
  type IdempotencyKeyHandle,
  type InDoubtAttempt,
  type UseIdempotencyKeyOptions,
  useIdempotencyKey,
} from './use-idempotency-key.ts';
export {
  type IdempotentMutationState,
  type IdempotentMutationStatus,
  type IdempotentProcedureOnly,
  type IdempotentRequestOptions,
  type UseIdempotentMutationOptions,
  type UseIdempotentMutationResult,
  useIdempotentMutation,
} from './use-idempotent-mutation.ts';
