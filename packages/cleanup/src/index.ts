/** @idem/cleanup — the shop's retention run, shared by the worker's schedule, `pnpm idem:cleanup` and the bench. */
export {
  type CleanupOptions,
  type CleanupSummary,
  DEFAULT_OUTCOME_STATS_RETENTION_DAYS,
  DEFAULT_PROCESSED_EVENTS_RETENTION_HOURS,
  deleteOldOutcomeStats,
  deleteOldProcessedEvents,
  formatCleanupSummary,
  runCleanup,
} from './run-cleanup.ts';
