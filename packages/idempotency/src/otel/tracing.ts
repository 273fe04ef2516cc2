/**
 * OpenTelemetry spans for idempotent requests, on `@opentelemetry/api` alone: one span per keyed request
 * (`idempotency <procedure>`), with the steps of its key's life as span events, built from the library's
 * `node:diagnostics_channel` messages. Attributes: `idem.procedure`, `idem.mode`, `idem.key_hash` (never the
 * key, the payload or the principal), `idem.outcome`, `idem.replayed`.
 *
 * The span is a child of the context active when the request arrives (the framework's or the HTTP server's
 * span). It is not made the active span for the procedure: its own outgoing calls stay children of that outer
 * span, which is what the diagnostics channel can offer without wrapping the procedure.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { type Channel, channel } from 'node:diagnostics_channel';
import { context, type Span, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import {
  IDEMPOTENCY_REQUEST_CHANNEL,
  IDEMPOTENCY_STEP_CHANNELS,
  type IdempotencyRequestTrace,
  type IdempotencyStepMessage,
} from '../core/diagnostics.ts';
import { IdempotencyError } from '../core/errors.ts';
import { RequestOutcome } from '../core/record.ts';

export interface IdempotencyTracingOptions {
  /** Default: `trace.getTracer('@idem/idempotency')` from the globally registered provider. */
  tracer?: Tracer;
}

/** The attribute names the spans carry. */
export const IdempotencySpanAttribute = {
  procedure: 'idem.procedure',
  mode: 'idem.mode',
  keyHash: 'idem.key_hash',
  outcome: 'idem.outcome',
  replayed: 'idem.replayed',
  takeover: 'idem.takeover',
} as const;

/**
 * Starts tracing every idempotent request of this process; returns the function that stops it. Calling it
 * twice traces twice: call it once, at startup.
 */
export function traceIdempotency(options: IdempotencyTracingOptions = {}): () => void {
  const tracer = options.tracer ?? trace.getTracer('@idem/idempotency');
  // The TracingChannel's own sub-channels, by name: their typings differ between @types/node majors.
  const [start, asyncEnd, error] = ['start', 'asyncEnd', 'error'].map((event) =>
    channel(`tracing:${IDEMPOTENCY_REQUEST_CHANNEL}:${event}`),
  ) as [Channel, Channel, Channel];
  const spans = new WeakMap<object, Span>();
  /** The span of the request whose code is running: the steps' messages carry no reference to it. */
  const current = new AsyncLocalStorage<Span>();

  start.bindStore(current, (message) => {
    const request = message as IdempotencyRequestTrace;
    const span = tracer.startSpan(
      `idempotency ${request.procedure}`,
      {
        attributes: {
          [IdempotencySpanAttribute.procedure]: request.procedure,
          [IdempotencySpanAttribute.mode]: request.mode,
        },
      },
      context.active(),
    );
    spans.set(request, span);
    return span;
  });
  const onEnd = (message: unknown) => {
    const request = message as IdempotencyRequestTrace;
    const span = spans.get(request);
    if (!span) return;
    if (request.keyHash) span.setAttribute(IdempotencySpanAttribute.keyHash, request.keyHash);
    if (request.outcome) {
      span.setAttribute(IdempotencySpanAttribute.outcome, request.outcome);
      span.setAttribute(IdempotencySpanAttribute.replayed, request.outcome === RequestOutcome.replayed);
    }
    span.end();
  };
  const onError = (message: unknown) => {
    const { error: thrown } = message as { error?: unknown };
    const span = spans.get(message as object);
    // The layer's own refusals (400, 409, 422, 429) are answers, not failures of the server.
    if (!span || thrown instanceof IdempotencyError) return;
    span.setStatus({ code: SpanStatusCode.ERROR });
    if (thrown instanceof Error) span.recordException(thrown);
  };
  asyncEnd.subscribe(onEnd);
  error.subscribe(onError);

  const onStep = (message: unknown) => {
    const step = message as IdempotencyStepMessage;
    current.getStore()?.addEvent(`idem.${step.step}`, {
      ...(step.takeover === undefined ? {} : { [IdempotencySpanAttribute.takeover]: step.takeover }),
    });
  };
  const steps = Object.values(IDEMPOTENCY_STEP_CHANNELS).map((name) => channel(name));
  for (const step of steps) step.subscribe(onStep);

  return () => {
    asyncEnd.unsubscribe(onEnd);
    error.unsubscribe(onError);
    start.unbindStore(current);
    for (const step of steps) step.unsubscribe(onStep);
  };
}
