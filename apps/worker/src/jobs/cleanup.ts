/**
 * The cleanup job: expired idempotency keys (never one whose lease is live), then processed events older than
 * the retention. Both delete in short batches of `ctid IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`: no long
 * lock, and two runs at once split the rows instead of waiting on (or double-counting) each other.
 *
 * Runs on a pg-boss schedule in the worker; `runCleanup` is exported for `pnpm idem:cleanup` too
 * (import from `@idem/worker/cleanup`).
 */
import type { Database } from '@idem/db';
import {
  type CleanupResult,
  cleanupExpiredKeys,
  createPrismaIdempotencyStore,
} from '@idem/idempotency/prisma';
import { type PgBoss, Queue } from '@idem/jobs';
import type { Logger } from '../log.ts';

export const DEFAULT_CLEANUP_CRON = '*/5 * * * *';
export const DEFAULT_PROCESSED_EVENTS_RETENTION_HOURS = 72;

export interface CleanupOptions {
  /** Rows per batch (per short transaction). Default 1000. */
  batchSize?: number;
  /**
   * Processed events younger than this are kept. Default 72 h: a webhook redelivered within the provider's
   * retry window (Stripe: 3 days) must still find its event row.
   */
  processedEventsRetentionHours?: number;
  /** Tables, for tests that work on private copies. Defaults: idempotency_keys, processed_events. */
  idempotencyKeysTable?: string;
  processedEventsTable?: string;
}

export interface CleanupSummary {
  idempotencyKeys: CleanupResult;
  processedEvents: CleanupResult;
  retentionHours: number;
  ms: number;
}

export async function runCleanup(db: Database, options: CleanupOptions = {}): Promise<CleanupSummary> {
  const batchSize = options.batchSize ?? 1_000;
  const retentionHours = options.processedEventsRetentionHours ?? DEFAULT_PROCESSED_EVENTS_RETENTION_HOURS;
  const started = performance.now();
  const store = createPrismaIdempotencyStore(
    db,
    options.idempotencyKeysTable ? { table: options.idempotencyKeysTable } : {},
  );
  const idempotencyKeys = await cleanupExpiredKeys(store, { batchSize });
  const processedEvents = await deleteOldProcessedEvents(db, {
    batchSize,
    retentionHours,
    table: options.processedEventsTable,
  });
  return { idempotencyKeys, processedEvents, retentionHours, ms: performance.now() - started };
}

/** The one log line of a run. */
export function formatCleanupSummary(summary: CleanupSummary): string {
  const { idempotencyKeys: keys, processedEvents: events } = summary;
  return (
    `cleanup: deleted ${keys.deleted} expired idempotency keys (${keys.batches} batch(es)) and ` +
    `${events.deleted} processed events older than ${summary.retentionHours} h (${events.batches} batch(es)) ` +
    `in ${(summary.ms / 1000).toFixed(2)} s`
  );
}

export async function deleteOldProcessedEvents(
  db: Database,
  {
    batchSize,
    retentionHours,
    table = 'processed_events',
  }: { batchSize: number; retentionHours: number; table?: string },
): Promise<CleanupResult> {
  if (!Number.isSafeInteger(batchSize) || batchSize < 1)
    throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
  if (!Number.isFinite(retentionHours) || retentionHours <= 0)
    throw new RangeError(`retentionHours must be positive, got ${retentionHours}`);
  const name = quoteTable(table);
  let deleted = 0;
  let batches = 0;
  for (;;) {
    const count = await db.$executeRawUnsafe(
      `delete from ${name} where ctid in (
         select ctid from ${name}
         where processed_at < now() - make_interval(secs => $1::double precision)
         limit $2 for update skip locked)`,
      retentionHours * 3600,
      batchSize,
    );
    batches += 1;
    deleted += count;
    if (count < batchSize) break;
  }
  return { deleted, batches };
}

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

function quoteTable(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/.test(name))
    throw new Error(`Invalid table name: ${name}`);
  return name
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}
