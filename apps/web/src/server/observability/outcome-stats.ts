/**
 * The process's outcome counter for the admin dashboard: `recordOutcome` from the idempotency layer's
 * onEvent (in memory, no I/O), flushed to `idempotency_stats` every IDEM_STATS_FLUSH_SECONDS in the background.
 */
import 'server-only';
import type { Database } from '@idem/db';
import { env } from '~/env';
import { db } from '../db.ts';
import { logger } from './log.ts';
import {
  createOutcomeStatsBuffer,
  type OutcomeCount,
  type OutcomeStatsBuffer,
} from './outcome-stats-buffer.ts';

/** Adds the counts to their rows in one statement (the rows arrive sorted, so concurrent flushes cannot deadlock). */
export async function writeOutcomeCounts(database: Database, counts: OutcomeCount[]): Promise<void> {
  if (counts.length === 0) return;
  await database.$executeRawUnsafe(
    `insert into idempotency_stats as s (bucket, procedure, outcome, count)
     select * from unnest($1::timestamptz[], $2::text[], $3::text[], $4::bigint[])
     on conflict (bucket, procedure, outcome) do update set count = s.count + excluded.count`,
    counts.map((row) => row.bucket.toISOString()),
    counts.map((row) => row.procedure),
    counts.map((row) => row.outcome),
    counts.map((row) => row.count),
  );
}

// One buffer per server process; kept on globalThis because Next's dev server re-evaluates modules.
const cache = globalThis as unknown as { idemOutcomeStats?: OutcomeStatsBuffer };
cache.idemOutcomeStats ??= createOutcomeStatsBuffer({
  write: (counts) => writeOutcomeCounts(db, counts),
  intervalMs: env.IDEM_STATS_FLUSH_SECONDS * 1000,
  onError: (error) =>
    logger.warn(
      { err: error instanceof Error ? error.message : String(error) },
      'outcome stats flush failed; counts kept for the next flush',
    ),
});

export const outcomeStats: OutcomeStatsBuffer = cache.idemOutcomeStats;
