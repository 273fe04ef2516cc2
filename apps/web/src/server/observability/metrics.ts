/**
 * Prometheus metrics (`GET /api/metrics`). One registry per server process, kept on globalThis because Next's dev
 * server re-evaluates modules (registering a metric twice throws).
 */
import type { PersistedCounter } from '@idem/contracts';
import { DEFAULT_IDEMPOTENCY_TABLE } from '@idem/idempotency/prisma';
import type { IdempotencyEvent } from '@idem/idempotency/trpc';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** A counter kept in operational_counters, by its key in `PersistedCounter`. */
export type PersistedCounterKey = keyof typeof PersistedCounter;

/** How one counter of operational_counters shows in Prometheus. */
export interface PersistedCounterMetric {
  name: string;
  help: string;
  /** The Prometheus label the stored `label` column fills; null for a counter without labels. */
  labelName: string | null;
  /** Series shown at 0 before anything happened, so dashboards and alerts have them from the start. */
  knownLabels: readonly string[];
}

/**
 * The counters the worker and every web process keep in operational_counters (`PersistedCounter`, counted in
 * the transaction of the work they count), one row each, in the order they are registered and scraped.
 */
export const PERSISTED_COUNTER_METRICS: Record<PersistedCounterKey, PersistedCounterMetric> = {
  cleanupRuns: {
    name: 'idem_cleanup_runs_total',
    help: 'Finished cleanup runs (worker schedule and pnpm idem:cleanup), all processes.',
    labelName: null,
    knownLabels: [''],
  },
  cleanupRowsRemoved: {
    name: 'idem_cleanup_rows_removed_total',
    help: `Rows deleted by the cleanup, by table (${DEFAULT_IDEMPOTENCY_TABLE}, processed_events), all processes.`,
    labelName: 'table',
    knownLabels: [DEFAULT_IDEMPOTENCY_TABLE, 'processed_events'],
  },
  webhookDuplicatesDropped: {
    name: 'idem_webhook_duplicates_dropped_total',
    help: 'Webhook deliveries whose event id was already in processed_events (nothing applied), all processes.',
    labelName: 'source',
    knownLabels: ['provider'],
  },
  webhookChargeAnomalies: {
    name: 'idem_webhook_charge_anomalies_total',
    help: "Signed charge events whose amount or currency is not their order's (order left untouched), by reason, all processes.",
    labelName: 'reason',
    knownLabels: ['amount_mismatch', 'currency_mismatch', 'other_charge', 'paid_after_cancel'],
  },
  ordersReconciled: {
    name: 'idem_orders_reconciled_total',
    help: "Pending orders the worker's reconciler settled from the provider's record, by outcome (paid, payment_failed, abandoned).",
    labelName: 'outcome',
    knownLabels: ['paid', 'payment_failed', 'abandoned'],
  },
  reconcileAnomalies: {
    name: 'idem_reconcile_anomalies_total',
    help: 'Pending orders whose provider record holds a succeeded charge that does not match them (left for a human), all workers.',
    labelName: null,
    knownLabels: [''],
  },
  lateChargesRefunded: {
    name: 'idem_late_charges_refunded_total',
    help: 'Charges that succeeded on an order the reconciler had cancelled, refunded by it, all workers.',
    labelName: null,
    knownLabels: [''],
  },
  strandedPaidRequeued: {
    name: 'idem_stranded_paid_requeued_total',
    help: 'Paid orders left unshipped with no live fulfilment job (webhook given up, job retries exhausted), given one by the reconciler, all workers.',
    labelName: null,
    knownLabels: [''],
  },
  jobDuplicatesDropped: {
    name: 'idem_job_duplicates_dropped_total',
    help: 'Job deliveries that found their effects already done (absorbed by unique keys), by queue, all workers.',
    labelName: 'queue',
    knownLabels: ['fulfilment'],
  },
};

/** The persisted counters' keys, in the table's order (its type holds exactly PersistedCounter's keys). */
export const PERSISTED_COUNTER_KEYS = Object.keys(PERSISTED_COUNTER_METRICS) as PersistedCounterKey[];

/** A Prometheus counter per row of PERSISTED_COUNTER_METRICS, registered in the table's order. */
function persistedCounters(registry: Registry): Record<PersistedCounterKey, Counter<string>> {
  const entries = PERSISTED_COUNTER_KEYS.map((key) => {
    const { name, help, labelName } = PERSISTED_COUNTER_METRICS[key];
    return [
      key,
      new Counter({ name, help, labelNames: labelName === null ? [] : [labelName], registers: [registry] }),
    ] as const;
  });
  return Object.fromEntries(entries) as Record<PersistedCounterKey, Counter<string>>;
}

function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    requests: new Counter({
      name: 'idem_requests_total',
      help: 'Idempotent requests by procedure and outcome (executed, replayed, conflict, mismatch, rejected, released, unkeyed).',
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
      help: 'Provider webhook deliveries by event type and result (applied, duplicate, ignored, anomaly).',
      labelNames: ['type', 'result'] as const,
      registers: [registry],
    }),
    // Read from the database at scrape time (database-metrics.ts): the same values from every web process.
    keysInFlight: new Gauge({
      name: 'idem_keys_in_flight',
      help: 'Idempotency keys being processed now (state processing, lease live).',
      registers: [registry],
    }),
    leasesExpired: new Gauge({
      name: 'idem_leases_expired',
      help: 'Idempotency keys still processing whose lease has ended: a crashed owner, until a retry takes the key over or an admin evicts it.',
      registers: [registry],
    }),
    ordersPastTheirTime: new Gauge({
      name: 'idem_order_invariant_violations',
      help: 'Orders out of their invariant: pending, or paid and not shipped, 15 min past their last charge attempt or payment (pnpm idem:audit lists them).',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    // Read from operational_counters at scrape time (database-metrics.ts), like the gauges above.
    ...persistedCounters(registry),
    webhookDeliveriesGivenUp: new Gauge({
      name: 'idem_webhook_deliveries_given_up',
      help: 'Provider events of the last 24 h whose webhook delivery failed every attempt (GET /v1/events?delivery_success=false; at most 100 counted).',
      registers: [registry],
    }),
    providerUp: new Gauge({
      name: 'idem_metrics_provider_up',
      help: "1 if this scrape read the provider's undelivered events, 0 if it could not (idem_webhook_deliveries_given_up then keeps its last value).",
      registers: [registry],
    }),
    databaseUp: new Gauge({
      name: 'idem_metrics_database_up',
      help: '1 if this scrape read the database-backed metrics, 0 if the query failed (they then keep their last values).',
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
