/** The fulfilment jobs of one order, as pg-boss reports them (pg-boss's findJobs matches on the payload). */

import { Queue } from '@idem/contracts';
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { FulfilmentJob } from './fulfilment.ts';

export interface FulfilmentJobRecord {
  id: string;
  state: JobWithMetadata['state'];
  retryCount: number;
  createdOn: Date;
  startedOn: Date | null;
  completedOn: Date | null;
  /** What the handler returned, if it finished. */
  output: unknown;
  /** The trace of the request that paid the order (from the job's `traceparent`), when it was traced. */
  traceId: string | null;
}

/**
 * Oldest first. A finished job is kept for the queue's `deleteAfterSeconds` (pg-boss's default: 7 days), then
 * deleted; pg-boss 11+ has no archive.
 */
export async function findFulfilmentJobs(boss: PgBoss, orderId: string): Promise<FulfilmentJobRecord[]> {
  const match: FulfilmentJob = { orderId };
  const jobs = await boss.findJobs<FulfilmentJob>(Queue.fulfilment, { data: match });
  return jobs.map((job) => ({
    id: job.id,
    state: job.state,
    retryCount: job.retryCount,
    createdOn: job.createdOn,
    startedOn: job.startedOn ?? null,
    completedOn: job.completedOn,
    output: job.output,
    traceId: traceIdOf(job.data.traceparent),
  }));
}

/** The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), or null. */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  return traceparent?.match(/^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/)?.[1] ?? null;
}
