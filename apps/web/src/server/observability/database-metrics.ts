/**
 * The metrics that live in the database, read at scrape time: the key gauges (the library's count of the
 * `processing` keys) and the persisted counters of `operational_counters` — written by the worker and by every
 * web process in the same transaction as the work they count.
 */

import { PersistedCounter } from '@idem/contracts';
import type { Database } from '@idem/db';
import { DEFAULT_IDEMPOTENCY_TABLE } from '@idem/idempotency/prisma';
import { countOrdersPastTheirTime } from '@idem/payments';
import type { Counter } from 'prom-client';
import { keyOperations } from '../admin/key-rows.ts';
import { logger } from './log.ts';
import { metrics } from './metrics.ts';
import { sharedRead } from './shared-read.ts';

interface CounterBinding {
  metric: Counter<string>;
  /** The Prometheus label the stored `label` column maps to; null for a counter without labels. */
  labelName: string | null;
  /** Series shown at 0 before anything happened, so dashboards and alerts have them from the start. */
  knownLabels: string[];
}

const bindings: Record<string, CounterBinding> = {
  [PersistedCounter.cleanupRuns]: { metric: metrics.cleanupRuns, labelName: null, knownLabels: [''] },
  [PersistedCounter.cleanupRowsRemoved]: {
    metric: metrics.cleanupRowsRemoved,
    labelName: 'table',
    knownLabels: [DEFAULT_IDEMPOTENCY_TABLE, 'processed_events'],
  },
  [PersistedCounter.webhookDuplicatesDropped]: {
    metric: metrics.webhookDuplicatesDropped,
    labelName: 'source',
    knownLabels: ['provider'],
  },
  [PersistedCounter.webhookChargeAnomalies]: {
    metric: metrics.webhookChargeAnomalies,
    labelName: 'reason',
    knownLabels: ['amount_mismatch', 'currency_mismatch', 'other_charge', 'paid_after_cancel'],
  },
  [PersistedCounter.ordersReconciled]: {
    metric: metrics.ordersReconciled,
    labelName: 'outcome',
    knownLabels: ['paid', 'payment_failed', 'abandoned'],
  },
  [PersistedCounter.reconcileAnomalies]: {
    metric: metrics.reconcileAnomalies,
    labelName: null,
    knownLabels: [''],
  },
  [PersistedCounter.lateChargesRefunded]: {
    metric: metrics.lateChargesRefunded,
    labelName: null,
    knownLabels: [''],
  },
  [PersistedCounter.strandedPaidRequeued]: {
    metric: metrics.strandedPaidRequeued,
    labelName: null,
    knownLabels: [''],
  },
  [PersistedCounter.jobDuplicatesDropped]: {
    metric: metrics.jobDuplicatesDropped,
    labelName: 'queue',
    knownLabels: ['fulfilment'],
  },
};

export interface DatabaseMetricsSnapshot {
  keysInFlight: number;
  leasesExpired: number;
  /** Orders past their time (the database's part of the order invariant), by state. */
  ordersPastTheirTime: { pending: number; paid: number };
  counters: Array<{ name: string; label: string; value: number }>;
}

/**
 * Three queries at once: the orders past their time (two counts over the orders' (status, created_at) index and
 * the paid orders' payments), the key counts (`countProcessing`: one pass over the processing keys — the `(scope,
 * state)` index leads with scope, so it does not narrow a count over every scope) and the counters. Callers go
 * through `databaseMetricsSnapshot` (cached, shared).
 */
export async function readDatabaseMetrics(db: Database): Promise<DatabaseMetricsSnapshot> {
  const [keys, ordersPastTheirTime, counters] = await Promise.all([
    keyOperations(db).countProcessing(),
    countOrdersPastTheirTime(db),
    db.$queryRawUnsafe<DatabaseMetricsSnapshot['counters']>(
      `select name, label, value::float8 as value from operational_counters`,
    ),
  ]);
  return { keysInFlight: keys.inFlight, leasesExpired: keys.stuck, ordersPastTheirTime, counters };
}

/**
 * How old a snapshot may be before it is read again. The key count reads every processing key, so scrapes,
 * several open dashboards and a scrape storm share one read per interval.
 */
export const DATABASE_METRICS_MAX_AGE_MS = 10_000;

const snapshots = sharedRead(readDatabaseMetrics);

/** The last snapshot if younger than `maxAgeMs`, else a fresh read (concurrent callers share it). */
export function databaseMetricsSnapshot(
  db: Database,
  maxAgeMs: number = DATABASE_METRICS_MAX_AGE_MS,
): Promise<DatabaseMetricsSnapshot> {
  return snapshots(db, maxAgeMs);
}

/** Loads the snapshot into the registry's metrics. Never throws: a failed read sets idem_metrics_database_up 0. */
export async function refreshDatabaseMetrics(
  db: Database,
  maxAgeMs: number = DATABASE_METRICS_MAX_AGE_MS,
): Promise<void> {
  let snapshot: DatabaseMetricsSnapshot;
  try {
    snapshot = await databaseMetricsSnapshot(db, maxAgeMs);
  } catch (error) {
    metrics.databaseUp.set(0);
    logger.warn(
      { err: error instanceof Error ? error.message : String(error) },
      'database metrics unavailable',
    );
    return;
  }
  // Synchronous from here on: a concurrent scrape never sees a counter between reset and set.
  metrics.keysInFlight.set(snapshot.keysInFlight);
  metrics.leasesExpired.set(snapshot.leasesExpired);
  metrics.ordersPastTheirTime.set({ kind: 'pending_too_long' }, snapshot.ordersPastTheirTime.pending);
  metrics.ordersPastTheirTime.set({ kind: 'paid_not_shipped' }, snapshot.ordersPastTheirTime.paid);
  for (const [name, binding] of Object.entries(bindings)) {
    const values = new Map(binding.knownLabels.map((label) => [label, 0]));
    for (const counter of snapshot.counters) {
      if (counter.name === name) values.set(counter.label, counter.value);
    }
    binding.metric.reset();
    for (const [label, value] of values) {
      if (binding.labelName === null) binding.metric.inc(value);
      else binding.metric.inc({ [binding.labelName]: label }, value);
    }
  }
  metrics.databaseUp.set(1);
}
