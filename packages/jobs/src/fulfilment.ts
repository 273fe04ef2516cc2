/**
 * The fulfilment job: "ship this paid order and send its receipt". Delivered at least once — the worker's
 * effects are deduplicated by unique constraints, never by the queue.
 */

import { Queue } from '@idem/contracts';
import { context, propagation } from '@opentelemetry/api';
import type { Db, PgBoss, Queue as QueueSettings } from 'pg-boss';
import { z } from 'zod';
import { describeZodError, intFromEnv } from './settings.ts';

export const fulfilmentJobSchema = z.object({
  orderId: z.uuid(),
  /** The trace of the request that paid the order (W3C Trace Context), when one is being traced. */
  traceparent: z.string().max(128).optional(),
  tracestate: z.string().max(512).optional(),
});
export type FulfilmentJob = z.infer<typeof fulfilmentJobSchema>;

export interface FulfilmentQueueSettings {
  /**
   * Seconds a started job may stay active. Past it, maintenance fails the job and it is retried: this is how a
   * job whose worker died (SIGKILL, OOM, lost host) is redelivered. pg-boss also fails a handler that runs
   * longer than this (the handler may still be running: the effects must tolerate overlap, and they do).
   */
  expireInSeconds: number;
  /** Retries after the first attempt (failures and expiries both count). */
  retryLimit: number;
  /** Base of the exponential backoff: the n-th retry waits retryDelay·2^(n-1) … retryDelay·2^n seconds. */
  retryDelaySeconds: number;
}

export const fulfilmentEnvShape = {
  FULFILMENT_EXPIRE_SECONDS: intFromEnv(1, 30),
  FULFILMENT_RETRY_LIMIT: intFromEnv(0, 10),
  FULFILMENT_RETRY_DELAY_SECONDS: intFromEnv(1, 2),
};

/** Reads FULFILMENT_EXPIRE_SECONDS (default 30), FULFILMENT_RETRY_LIMIT (10), FULFILMENT_RETRY_DELAY_SECONDS (2). */
export function fulfilmentSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): FulfilmentQueueSettings {
  const parsed = z.object(fulfilmentEnvShape).safeParse(env);
  if (!parsed.success)
    throw new Error(`Invalid fulfilment queue settings: ${describeZodError(parsed.error)}`);
  return {
    expireInSeconds: parsed.data.FULFILMENT_EXPIRE_SECONDS,
    retryLimit: parsed.data.FULFILMENT_RETRY_LIMIT,
    retryDelaySeconds: parsed.data.FULFILMENT_RETRY_DELAY_SECONDS,
  };
}

/**
 * Queue-level options, so a sender never has to pass them: a job takes its expiry and retries from the queue
 * row when it is inserted. Policy `standard`: the queue does not deduplicate — the worker's unique constraints
 * do. (pg-boss's `short`/`singleton` policies key on the singleton key, which is '' for a job sent without one:
 * one waiting keyless job would silently swallow every other order's job.)
 */
export function fulfilmentQueueOptions(settings: FulfilmentQueueSettings): Omit<QueueSettings, 'name'> {
  return {
    policy: 'standard',
    expireInSeconds: settings.expireInSeconds,
    retryLimit: settings.retryLimit,
    retryDelay: settings.retryDelaySeconds,
    retryBackoff: true,
  };
}

/**
 * Enqueues fulfilment of `orderId` and returns the job id. Pass `db` — e.g. `prismaTransactionDb(tx)` — to
 * insert the job in the caller's transaction: it then exists if and only if that transaction commits.
 */
export async function enqueueFulfilment(boss: PgBoss, orderId: string, db?: Db): Promise<string> {
  // The paying request's trace goes with the job, so the shipment shows in the purchase's trace.
  const trace: Record<string, string> = {};
  propagation.inject(context.active(), trace);
  const data: FulfilmentJob = fulfilmentJobSchema.parse({ orderId, ...trace });
  let id: string | null;
  try {
    id = await boss.send(Queue.fulfilment, data, db ? { db } : {});
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code === 'PGBOSS_QUEUE_NOT_FOUND') throw missingQueue(error);
    throw error;
  }
  // A standard queue never suppresses a send; null would mean no row was written.
  if (id === null) throw missingQueue();
  return id;
}

function missingQueue(cause?: unknown): Error {
  return new Error(`Queue "${Queue.fulfilment}" does not exist: start pg-boss with startJobQueue()`, {
    cause,
  });
}
