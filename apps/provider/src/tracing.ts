/**
 * Each API request as a server span that continues the caller's trace (its `traceparent`, W3C Trace Context), so
 * a checkout's charge shows in the trace of the purchase that made it. No-op without an OpenTelemetry SDK.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';

const tracer = trace.getTracer('@idem/provider');

export function traced(
  req: IncomingMessage,
  res: ServerResponse,
  listener: (req: IncomingMessage, res: ServerResponse) => void,
): void {
  const parent = propagation.extract(context.active(), req.headers);
  const path = (req.url ?? '/').split('?')[0];
  const span = tracer.startSpan(`provider ${req.method} ${path}`, { kind: SpanKind.SERVER }, parent);
  res.once('close', () => {
    span.setAttribute('http.response.status_code', res.statusCode);
    span.end();
  });
  context.with(trace.setSpan(parent, span), () => listener(req, res));
}
