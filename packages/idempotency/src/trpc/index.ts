/** @idem/idempotency/trpc — idempotent tRPC mutations as `.concat()`-able procedures. */

export { UnstableScope, unstableScope } from '../core/errors.ts';
export type { WireTransformer } from '../core/wire-form.ts';
export type {
  HasIdempotentMark,
  IdempotentErrorShape,
  IdempotentProcedurePath,
  IsIdempotentProcedureError,
  MarkedIdempotent,
} from '../idempotent-procedure.ts';
export { ReplayedErrorCause, toTRPCError } from './errors.ts';
export {
  type HttpContextOptions,
  type IdempotencyHttpContext,
  idempotencyHttpContext,
  type NodeRequestHeaders,
} from './http-context.ts';
export {
  type CreateIdempotencyConfig,
  createIdempotency,
  type IdempotencyEvent,
  type IdempotentProcedureContext,
  type TransactionalProcedureContext,
} from './middleware.ts';
