/**
 * The worker's counters, persisted: Prometheus scrapes the web app, not the worker, and there may be several
 * workers. Each count is added to `operational_counters` in the SAME transaction (or statement) as the work it
 * counts, so a crash can never count work that was rolled back, nor lose work that committed.
 * The web app reads these rows at scrape time (apps/web/src/server/observability/database-metrics.ts).
 */

/** Names and label values as stored; the web app exposes them as `idem_<name>_total{…}`. */
export const WorkerCounter = {
  cleanupRuns: { name: 'cleanup_runs', label: '' },
  keysRemoved: { name: 'cleanup_rows_removed', label: 'idempotency_keys' },
  processedEventsRemoved: { name: 'cleanup_rows_removed', label: 'processed_events' },
  fulfilmentDuplicatesDropped: { name: 'job_duplicates_dropped', label: 'fulfilment' },
  /** Pending orders the reconciler settled from the provider's answer, by outcome. */
  ordersReconciled: {
    paid: { name: 'orders_reconciled', label: 'paid' },
    payment_failed: { name: 'orders_reconciled', label: 'payment_failed' },
    abandoned: { name: 'orders_reconciled', label: 'abandoned' },
  },
  /** Pending orders whose provider record holds a succeeded charge that does not match them (once per order). */
  reconcileAnomalies: { name: 'reconcile_anomalies', label: '' },
  /** Charges that succeeded on an order the reconciler had given up, refunded by it (an anomaly each). */
  lateChargesRefunded: { name: 'late_charges_refunded', label: '' },
} as const satisfies Record<string, CounterId | Record<string, CounterId>>;

export interface CounterId {
  name: string;
  label: string;
}

/** Anything that runs raw SQL: a Prisma client or an interactive transaction. */
export interface SqlRunner {
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
}

/**
 * The upsert as SQL text, to embed in a larger statement: `rows` yields (name, label, amount, now()), e.g.
 * `select $3, $4, count(*), now() from deleted having count(*) > 0` to count what a CTE deleted.
 */
export function incrementCounterSql(rows: string): string {
  return `insert into operational_counters as c (name, label, value, updated_at) ${rows}
    on conflict (name, label) do update set value = c.value + excluded.value, updated_at = now()`;
}

const INCREMENT_COUNTER_SQL = incrementCounterSql('values ($1, $2, $3::bigint, now())');

export async function incrementCounter(db: SqlRunner, counter: CounterId, by = 1): Promise<void> {
  if (!Number.isSafeInteger(by) || by < 0)
    throw new RangeError(`by must be a non-negative integer, got ${by}`);
  if (by === 0) return;
  await db.$executeRawUnsafe(INCREMENT_COUNTER_SQL, counter.name, counter.label, by);
}
