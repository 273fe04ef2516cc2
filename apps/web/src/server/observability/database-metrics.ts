/**
 * The metrics that live in the database, read at scrape time: the key gauges (the library's count of the
 * `processing` keys) and the persisted counters of `operational_counters` — written by the worker and by every
 * web process in the same transaction as the work they count.
 */

import { PersistedCounter } from '@idem/contracts';
import type { Database } from '@idem/db';
import { countOrdersPastTheirTime } from '@idem/payments';
import { keyOperations } from '../admin/key-rows.ts';
import { logger } from './log.ts';
import { metrics, PERSISTED_COUNTER_KEYS, PERSISTED_COUNTER_METRICS } from './metrics.ts';
import { sharedRead } from './shared-read.ts';

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
  // Each persisted counter from its stored rows, with its known series at 0 where nothing was stored yet.
  for (const key of PERSISTED_COUNTER_KEYS) {
    const { labelName, knownLabels } = PERSISTED_COUNTER_METRICS[key];
    const metric = metrics[key];
    const values = new Map(knownLabels.map((label) => [label, 0]));
    for (const counter of snapshot.counters) {
      if (counter.name === PersistedCounter[key]) values.set(counter.label, counter.value);
    }
    metric.reset();
    for (const [label, value] of values) {
      if (labelName === null) metric.inc(value);
      else metric.inc({ [labelName]: label }, value);
    }
  }
  metrics.databaseUp.set(1);
}
