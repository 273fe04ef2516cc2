/**
 * The checkout's traces, on `@opentelemetry/api` alone: an API request is a server span that continues the
 * caller's `traceparent` (a browser or gateway that traces), and under it the idempotency span
 * (`@idem/idempotency/otel`), the provider call (its `traceparent` goes to the provider) and, through the job's
 * payload, the fulfilment. All of it is a no-op until an OpenTelemetry SDK is registered in the process (see
 * the README, "Tracing"): no SDK ships with the app, so by default nothing is recorded or sent.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

const tracer = trace.getTracer('@idem/web');

export function traceRequest(request: Request, handle: () => Promise<Response>): Promise<Response> {
  const caller = propagation.extract(context.active(), Object.fromEntries(request.headers));
  const { pathname } = new URL(request.url);
  return tracer.startActiveSpan(
    `${request.method} ${pathname}`,
    { kind: SpanKind.SERVER, attributes: { 'http.request.method': request.method, 'url.path': pathname } },
    caller,
    async (span) => {
      try {
        const response = await handle();
        span.setAttribute('http.response.status_code', response.status);
        if (response.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        return response;
      } finally {
        span.end();
      }
    },
  );
}
