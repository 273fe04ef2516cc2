/**
 * The cleanup job: `runCleanup` (@idem/cleanup) on pg-boss's cron, one log line per run.
 */

import { type CleanupOptions, formatCleanupSummary, runCleanup } from '@idem/cleanup';
import type { Database } from '@idem/db';
import { type PgBoss, Queue } from '@idem/jobs';
import type { Logger } from '../log.ts';

export const DEFAULT_CLEANUP_CRON = '*/5 * * * *';

/**
 * Puts the cleanup on pg-boss's cron (UTC), or takes it off with `null`. The schedule is a row in pg-boss's
 * schema, shared by every worker: the last worker started sets it; pg-boss sends at most one job per tick.
 */
export async function scheduleCleanup(boss: PgBoss, cron: string | null): Promise<void> {
  if (cron === null) {
    await boss.unschedule(Queue.cleanup);
    return;
  }
  try {
    await boss.schedule(Queue.cleanup, cron, {}, { tz: 'UTC' });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`IDEM_CLEANUP_CRON ${JSON.stringify(cron)} cannot be scheduled: ${reason}`);
  }
}

export async function workCleanup(
  boss: PgBoss,
  db: Database,
  options: CleanupOptions & { log: Logger; pollingIntervalSeconds: number },
): Promise<void> {
  await boss.work(Queue.cleanup, { pollingIntervalSeconds: options.pollingIntervalSeconds }, async () => {
    const summary = await runCleanup(db, options);
    options.log.info(formatCleanupSummary(summary));
    return summary;
  });
}
