/**
 * The OpenTelemetry SDK of a web process, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (off by default): a Node
 * tracer provider (AsyncLocalStorage context, W3C propagation) exporting over OTLP/HTTP as `serviceName`
 * (`OTEL_SERVICE_NAME`). With it, every span of
 * tracing.ts and the idempotency layer's (`traceIdempotency()`) is recorded and sent.
 */
import { traceIdempotency } from '@idem/idempotency/otel';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

export interface TracingSdk {
  /** Sends what is buffered; for shutdown and tests. */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** Starts the SDK for `endpoint` (the OTLP/HTTP base URL, e.g. `http://collector:4318`). */
export function startTracingSdk(endpoint: string, serviceName: string): TracingSdk {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url: new URL('/v1/traces', endpoint).href })),
    ],
  });
  provider.register();
  const stopIdempotencySpans = traceIdempotency();
  return {
    flush: () => provider.forceFlush(),
    async shutdown() {
      stopIdempotencySpans();
      await provider.shutdown();
    },
  };
}
