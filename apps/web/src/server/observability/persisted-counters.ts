/**
 * Names of the counters kept in `operational_counters` (name, label) → value. Written in the same transaction
 * as the work they count, by the worker (apps/worker/src/counters.ts: cleanup, job duplicates) and by the
 * webhook receiver (webhook duplicates); read at scrape time by database-metrics.ts.
 */
export const PersistedCounter = {
  cleanupRuns: 'cleanup_runs',
  cleanupRowsRemoved: 'cleanup_rows_removed',
  webhookDuplicatesDropped: 'webhook_duplicates_dropped',
  jobDuplicatesDropped: 'job_duplicates_dropped',
} as const;
