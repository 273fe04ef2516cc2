/**
 * The cleanup job: deletes expired idempotency keys and old processed events. Scheduled by the worker with
 * `boss.schedule(Queue.cleanup, cron)`; it carries no data. Every run is safe to repeat or overlap.
 */
import type PgBoss from 'pg-boss';

/** A scheduled run that fails is retried a couple of times; the next schedule tick covers the rest. */
export function cleanupQueueOptions(): Omit<PgBoss.Queue, 'name'> {
  return { policy: 'standard', expireInSeconds: 10 * 60, retryLimit: 2, retryDelay: 30, retryBackoff: true };
}
