/**
 * Names of the counters kept in `operational_counters` (name, label) → value. Written in the same transaction
 * as the work they count, by the worker (apps/worker/src/counters.ts: cleanup, job duplicates) and by the
 * webhook receiver (webhook duplicates, charges that do not match their order); read at scrape time by
 * database-metrics.ts.
 */
export const PersistedCounter = {
  cleanupRuns: 'cleanup_runs',
  cleanupRowsRemoved: 'cleanup_rows_removed',
  webhookDuplicatesDropped: 'webhook_duplicates_dropped',
  /** Label: why the charge is not the order's (`amount_mismatch`, `currency_mismatch`, `other_charge`). */
  webhookChargeAnomalies: 'webhook_charge_anomalies',
  jobDuplicatesDropped: 'job_duplicates_dropped',
  /** Label: how the payment reconciler settled a pending order (`paid`, `payment_failed`, `abandoned`). */
  ordersReconciled: 'orders_reconciled',
} as const;
