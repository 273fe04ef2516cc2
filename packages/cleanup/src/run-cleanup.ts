/**
 * The shop's retention run: expired idempotency keys (never one whose lease is live: the library's
 * `deleteExpired`) — the broker consumer's inbox rows among them —, processed events and broker messages already
 * sent (the outbox, with QUEUE_URL) older than the retention, and old per-minute outcome counts. Keys and events
 * delete in short batches of `ctid IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`: no long lock, and two runs at
 * once split the rows instead of waiting on (or double-counting) each other.
 *
 * Every batch adds its deleted rows to `operational_counters` in the same transaction as the delete, and a
 * finished run adds one to `cleanup_runs` (names in @idem/contracts): the web app's /api/metrics reads them.
 *
 * Used by the worker's scheduled job, `pnpm idem:cleanup` and the storage benchmark. The tables are named
 * unqualified: a test runs the cleanup on private copies by putting their schema first in its connection's
 * search_path.
 */

import { incrementCounter, incrementCounterSql, WorkerCounter } from '@idem/contracts';
import type { Database } from '@idem/db';
import { createOutbox } from '@idem/idempotency/consumer';
import { type CleanupResult, createIdempotencyKeyOperations } from '@idem/idempotency/prisma';

export const DEFAULT_PROCESSED_EVENTS_RETENTION_HOURS = 72;
/** The dashboard charts 7 days at most; a month of per-minute outcome counts is plenty. */
export const DEFAULT_OUTCOME_STATS_RETENTION_DAYS = 30;

export interface CleanupOptions {
  /**
   * Rows per batch (per short transaction). Default 10 000: 1 M expired keys go in ≈ 9.5 s instead of ≈ 12.8 s
   * with 1 000 (the delete itself costs the same per row; fewer round trips and commits), measured by
   * `pnpm bench:storage` (docs/BENCHMARKS.md, P6).
   */
  batchSize?: number;
  /**
   * Processed events younger than this are kept. Default 72 h: a webhook redelivered within the provider's
   * retry window (Stripe: 3 days) must still find its event row. Sent outbox messages are kept as long.
   */
  processedEventsRetentionHours?: number;
  /** Per-minute outcome counts (the admin dashboard's charts) older than this are deleted. Default 30 days. */
  outcomeStatsRetentionDays?: number;
}

export interface CleanupSummary {
  idempotencyKeys: CleanupResult;
  processedEvents: CleanupResult;
  /** Outbox messages sent more than `retentionHours` ago. */
  sentMessages: number;
  retentionHours: number;
  /** Rows of per-minute outcome counts deleted (older than `outcomeStatsRetentionDays`). */
  outcomeStats: number;
  ms: number;
}

export async function runCleanup(db: Database, options: CleanupOptions = {}): Promise<CleanupSummary> {
  const batchSize = options.batchSize ?? 10_000;
  const retentionHours = options.processedEventsRetentionHours ?? DEFAULT_PROCESSED_EVENTS_RETENTION_HOURS;
  const started = performance.now();
  const keys = createIdempotencyKeyOperations(db);
  // Each batch's count commits in the batch's own transaction, with the delete it counts.
  const idempotencyKeys = await keys.deleteExpired({
    batchSize,
    onBatch: (tx, deleted) => incrementCounter(tx, WorkerCounter.keysRemoved, deleted),
  });
  const processedEvents = await deleteOldProcessedEvents(db, { batchSize, retentionHours });
  const sentMessages = await deleteSentMessages(db, { batchSize, retentionHours });
  const outcomeStats = await deleteOldOutcomeStats(db, {
    retentionDays: options.outcomeStatsRetentionDays ?? DEFAULT_OUTCOME_STATS_RETENTION_DAYS,
  });
  await incrementCounter(db, WorkerCounter.cleanupRuns);
  return {
    idempotencyKeys,
    processedEvents,
    sentMessages,
    retentionHours,
    outcomeStats,
    ms: performance.now() - started,
  };
}

/** The one log line of a run. */
export function formatCleanupSummary(summary: CleanupSummary): string {
  const { idempotencyKeys: keys, processedEvents: events } = summary;
  return (
    `cleanup: deleted ${keys.deleted} expired idempotency keys (${keys.batches} batch(es)) and ` +
    `${events.deleted} processed events older than ${summary.retentionHours} h (${events.batches} batch(es)) ` +
    `and ${summary.sentMessages} sent outbox messages older than that ` +
    `and ${summary.outcomeStats} old outcome-stat rows in ${(summary.ms / 1000).toFixed(2)} s`
  );
}

/** The outbox's sent messages older than the retention, `batchSize` rows per statement. */
async function deleteSentMessages(
  db: Database,
  { batchSize, retentionHours }: { batchSize: number; retentionHours: number },
): Promise<number> {
  const outbox = createOutbox(db);
  let deleted = 0;
  for (;;) {
    const batch = await outbox.deleteSent(retentionHours * 3600, batchSize);
    deleted += batch;
    if (batch < batchSize) return deleted;
  }
}

/**
 * Keeps `idempotency_stats` (one row per minute, procedure and outcome) from growing forever. One statement:
 * at most a minute's worth of rows per procedure and outcome become old between two runs.
 */
export async function deleteOldOutcomeStats(
  db: Database,
  { retentionDays }: { retentionDays: number },
): Promise<number> {
  if (!Number.isFinite(retentionDays) || retentionDays <= 0)
    throw new RangeError(`retentionDays must be positive, got ${retentionDays}`);
  return db.$executeRawUnsafe(
    'delete from idempotency_stats where bucket < now() - make_interval(days => $1::int)',
    Math.ceil(retentionDays),
  );
}

export async function deleteOldProcessedEvents(
  db: Database,
  { batchSize, retentionHours }: { batchSize: number; retentionHours: number },
): Promise<CleanupResult> {
  if (!Number.isSafeInteger(batchSize) || batchSize < 1)
    throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
  if (!Number.isFinite(retentionHours) || retentionHours <= 0)
    throw new RangeError(`retentionHours must be positive, got ${retentionHours}`);
  let deleted = 0;
  let batches = 0;
  const counter = WorkerCounter.processedEventsRemoved;
  for (;;) {
    // One statement: the batch delete and its count in operational_counters commit together.
    const rows = await db.$queryRawUnsafe<Array<{ deleted: number }>>(
      `with deleted as (
         delete from processed_events where ctid in (
           select ctid from processed_events
           where processed_at < now() - make_interval(secs => $1::double precision)
           limit $2 for update skip locked)
         returning 1
       ), counted as (
         ${incrementCounterSql('select $3, $4, count(*), now() from deleted having count(*) > 0')}
       )
       select count(*)::int as deleted from deleted`,
      retentionHours * 3600,
      batchSize,
      counter.name,
      counter.label,
    );
    const count = rows[0]?.deleted ?? 0;
    batches += 1;
    deleted += count;
    if (count < batchSize) break;
  }
  return { deleted, batches };
}
