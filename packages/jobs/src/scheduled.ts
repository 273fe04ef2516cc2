/** Queue options of the worker's scheduled jobs (`boss.schedule(queue, cron)`): they carry no data. */
import type { Queue as QueueSettings } from 'pg-boss';

/**
 * The cleanup job: deletes expired idempotency keys and old processed events; every run is safe to repeat or
 * overlap. A run that fails is retried a couple of times; the next schedule tick covers the rest.
 */
export function cleanupQueueOptions(): Omit<QueueSettings, 'name'> {
  return { policy: 'standard', expireInSeconds: 10 * 60, retryLimit: 2, retryDelay: 30, retryBackoff: true };
}

/**
 * The payment reconciler: settles pending orders whose last charge attempt is old enough from the provider's
 * record. Scheduled like the cleanup, carries no data, safe to repeat or overlap (each order is decided under
 * its row lock). A run covers at most a bounded batch, so it never outlives its expiry.
 */
export function reconcileQueueOptions(): Omit<QueueSettings, 'name'> {
  return { policy: 'standard', expireInSeconds: 5 * 60, retryLimit: 2, retryDelay: 30, retryBackoff: true };
}
