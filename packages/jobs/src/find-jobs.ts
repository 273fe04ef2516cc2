/**
 * The fulfilment jobs of one order, live and archived, as pg-boss reports them. pg-boss 10 can fetch a job by
 * id but not search by payload, so the ids are found here — the one place that knows pg-boss's tables — and
 * each job is then read with `boss.getJobById`.
 */

import { Queue } from '@idem/contracts';
import type PgBoss from 'pg-boss';
import { DEFAULT_SCHEMA } from './boss.ts';

export interface FulfilmentJobRecord {
  id: string;
  state: PgBoss.JobWithMetadata['state'];
  retryCount: number;
  createdOn: Date;
  startedOn: Date | null;
  completedOn: Date | null;
  /** Moved to pg-boss's archive (a finished job, past its retention). */
  archived: boolean;
  /** What the handler returned, if it finished. */
  output: unknown;
}

/** Oldest first. `schema` must be the one the queue was started with (default `pgboss`). */
export async function findFulfilmentJobs(
  boss: PgBoss,
  orderId: string,
  schema: string = DEFAULT_SCHEMA,
): Promise<FulfilmentJobRecord[]> {
  const quoted = `"${schema.replaceAll('"', '""')}"`;
  const found = await boss.getDb().executeSql(
    `select id::text as id, false as archived from ${quoted}.job where name = $1 and data->>'orderId' = $2
     union all
     select id::text, true from ${quoted}.archive where name = $1 and data->>'orderId' = $2`,
    [Queue.fulfilment, orderId],
  );
  const records: FulfilmentJobRecord[] = [];
  for (const row of found.rows as Array<{ id: string; archived: boolean }>) {
    const job = await boss.getJobById(Queue.fulfilment, row.id, { includeArchive: row.archived });
    if (job === null) continue; // archived or deleted between the two reads
    records.push({
      id: job.id,
      state: job.state,
      retryCount: job.retryCount,
      createdOn: job.createdOn,
      startedOn: job.startedOn ?? null,
      completedOn: job.completedOn,
      archived: row.archived,
      output: job.output,
    });
  }
  return records.sort((a, b) => a.createdOn.getTime() - b.createdOn.getTime());
}
