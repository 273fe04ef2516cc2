/**
 * Counters kept in `operational_counters` (name, label) → value. Each count is added in the SAME transaction (or
 * statement) as the work it counts, so a crash can never count work that was rolled back, nor lose work that
 * committed. Written by the worker (cleanup, job duplicates, reconciliation) and by the web app's webhook
 * receiver (duplicates, charge anomalies); read by the web app at scrape time and exposed as
 * `idem_<name>_total{…}`.
 */
import { DEFAULT_IDEMPOTENCY_TABLE } from '@idem/idempotency/prisma';

export const PersistedCounter = {
  cleanupRuns: 'cleanup_runs',
  /** Label: the table the rows were removed from. */
  cleanupRowsRemoved: 'cleanup_rows_removed',
  webhookDuplicatesDropped: 'webhook_duplicates_dropped',
  /** Label: why the charge is not the order's (`amount_mismatch`, `currency_mismatch`, `other_charge`, `paid_after_cancel`). */
  webhookChargeAnomalies: 'webhook_charge_anomalies',
  /** Label: the queue. */
  jobDuplicatesDropped: 'job_duplicates_dropped',
  /** Label: how the payment reconciler settled a pending order (`paid`, `payment_failed`, `abandoned`). */
  ordersReconciled: 'orders_reconciled',
  /** Pending orders whose provider record holds a succeeded charge that does not match them (once per order). */
  reconcileAnomalies: 'reconcile_anomalies',
  /** Charges that succeeded on an order the reconciler had given up, refunded by it (an anomaly each). */
  lateChargesRefunded: 'late_charges_refunded',
  /** Paid orders that had gone unshipped with no live fulfilment job, given one by the reconciler. */
  strandedPaidRequeued: 'stranded_paid_requeued',
} as const;

export type PersistedCounterName = (typeof PersistedCounter)[keyof typeof PersistedCounter];

export interface CounterId {
  name: PersistedCounterName;
  label: string;
}

/** The worker's counters, as (name, label) pairs. */
export const WorkerCounter = {
  cleanupRuns: { name: PersistedCounter.cleanupRuns, label: '' },
  keysRemoved: { name: PersistedCounter.cleanupRowsRemoved, label: DEFAULT_IDEMPOTENCY_TABLE },
  processedEventsRemoved: { name: PersistedCounter.cleanupRowsRemoved, label: 'processed_events' },
  fulfilmentDuplicatesDropped: { name: PersistedCounter.jobDuplicatesDropped, label: 'fulfilment' },
  /** Pending orders the reconciler settled from the provider's answer, by outcome. */
  ordersReconciled: {
    paid: { name: PersistedCounter.ordersReconciled, label: 'paid' },
    payment_failed: { name: PersistedCounter.ordersReconciled, label: 'payment_failed' },
    abandoned: { name: PersistedCounter.ordersReconciled, label: 'abandoned' },
  },
  reconcileAnomalies: { name: PersistedCounter.reconcileAnomalies, label: '' },
  lateChargesRefunded: { name: PersistedCounter.lateChargesRefunded, label: '' },
  strandedPaidRequeued: { name: PersistedCounter.strandedPaidRequeued, label: '' },
} as const satisfies Record<string, CounterId | Record<string, CounterId>>;

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

/** Adds `by` (a non-negative integer) to the counter, in `db`'s transaction when `db` is one. */
export async function incrementCounter(db: SqlRunner, counter: CounterId, by = 1): Promise<void> {
  if (!Number.isSafeInteger(by) || by < 0)
    throw new RangeError(`by must be a non-negative integer, got ${by}`);
  if (by === 0) return;
  await db.$executeRawUnsafe(INCREMENT_COUNTER_SQL, counter.name, counter.label, by);
}
