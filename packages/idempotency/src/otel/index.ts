/** @idem/idempotency/otel — OpenTelemetry spans for idempotent requests, on `@opentelemetry/api` only. */

export {
  IdempotencySpanAttribute,
  type IdempotencyTracingOptions,
  traceIdempotency,
} from './tracing.ts';
