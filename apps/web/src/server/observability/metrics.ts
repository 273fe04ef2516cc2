/**
 * Prometheus metrics (`GET /api/metrics`). One registry per server process, kept on globalThis because Next's dev
 * server re-evaluates modules (registering a metric twice throws).
 */
import type { IdempotencyEvent } from '@idem/idempotency/trpc';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    requests: new Counter({
      name: 'idem_requests_total',
      help: 'Idempotent requests by procedure and outcome (executed, replayed, conflict, mismatch, rejected, released).',
      labelNames: ['procedure', 'outcome'] as const,
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'idem_request_duration_seconds',
      help: 'Time spent in the idempotency layer and the procedure, by outcome.',
      labelNames: ['procedure', 'outcome'] as const,
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    webhookEvents: new Counter({
      name: 'idem_webhook_events_total',
      help: 'Provider webhook deliveries by event type and result (applied, duplicate, ignored).',
      labelNames: ['type', 'result'] as const,
      registers: [registry],
    }),
  };
}

const cache = globalThis as unknown as { idemMetrics?: ReturnType<typeof createMetrics> };
cache.idemMetrics ??= createMetrics();
export const metrics = cache.idemMetrics;

export function recordIdempotencyEvent(event: IdempotencyEvent) {
  const labels = { procedure: event.procedure, outcome: event.outcome };
  metrics.requests.inc(labels);
  metrics.duration.observe(labels, event.durationMs / 1000);
}
