/** @idem/idempotency/fetch — idempotent web-standard `Request → Response` handlers (Next.js, Hono, …). */

export { UnstableScope, unstableScope } from '../core/errors.ts';
export type { IdempotencyEvent } from '../core/event.ts';
export type {
  HttpIdempotencyContext,
  HttpRouteOptions,
  TransactionalHttpContext,
} from '../http/guard.ts';
export { DEFAULT_MAX_BODY_BYTES } from '../http/guard.ts';
export { problemTypeOf } from '../http/problem.ts';
export { DEFAULT_REPLAYED_HEADERS } from '../http/stored.ts';
export { type CreateFetchIdempotencyConfig, createFetchIdempotency, type FetchHandler } from './handler.ts';
