/**
 * The dashboard's charts, from `idempotency_stats` (per-minute counts summed over every web process):
 * outcomes per procedure over a time range, and the running total of duplicates prevented — replays (the
 * stored answer sent again) plus 409s (a duplicate stopped while the first was still running).
 */
import type { Database } from '@idem/db';
import { z } from 'zod';

export const OUTCOMES = ['executed', 'replayed', 'conflict', 'mismatch', 'rejected', 'released'] as const;
export type Outcome = (typeof OUTCOMES)[number];
/** The outcomes that are a duplicate the layer kept from running twice. */
export const DUPLICATE_OUTCOMES: readonly Outcome[] = ['replayed', 'conflict'];

export const RANGES = {
  '1h': { stepSeconds: 60, points: 60 },
  '6h': { stepSeconds: 5 * 60, points: 72 },
  '24h': { stepSeconds: 15 * 60, points: 96 },
  '7d': { stepSeconds: 60 * 60, points: 168 },
} as const;
export const outcomeRangeSchema = z.enum(['1h', '6h', '24h', '7d']);
export type OutcomeRange = z.infer<typeof outcomeRangeSchema>;

export type OutcomePoint = { t: number } & Record<Outcome, number>;

export interface OutcomeSeries {
  range: OutcomeRange;
  stepSeconds: number;
  procedures: Array<{ procedure: string; points: OutcomePoint[]; totals: Record<Outcome, number> }>;
  duplicatesPrevented: Array<{ t: number; inBucket: number; runningTotal: number }>;
  /** Every duplicate prevented since the stats began (the running total's last value). */
  duplicatesPreventedTotal: number;
}

const zeroOutcomes = (): Record<Outcome, number> => ({
  executed: 0,
  replayed: 0,
  conflict: 0,
  mismatch: 0,
  rejected: 0,
  released: 0,
});

const isOutcome = (value: string): value is Outcome => (OUTCOMES as readonly string[]).includes(value);

/**
 * Buckets are aligned on the app's clock (the one the stats were counted with), at multiples of the step
 * since 2000-01-01 UTC — date_bin's origin below, itself a whole number of hours after the Unix epoch.
 */
export async function getOutcomeSeries(
  db: Database,
  range: OutcomeRange,
  now: number = Date.now(),
): Promise<OutcomeSeries> {
  const { stepSeconds, points } = RANGES[range];
  const stepMs = stepSeconds * 1000;
  const last = Math.floor(now / stepMs) * stepMs;
  const first = last - (points - 1) * stepMs;

  const [rows, before] = await Promise.all([
    db.$queryRawUnsafe<Array<{ t: Date; procedure: string; outcome: string; n: number }>>(
      `select date_bin(make_interval(secs => $1), bucket, timestamptz '2000-01-01 00:00:00+00') as t,
              procedure, outcome, sum(count)::float8 as n
       from idempotency_stats where bucket >= $2::timestamptz
       group by 1, 2, 3`,
      stepSeconds,
      new Date(first).toISOString(),
    ),
    db.$queryRawUnsafe<Array<{ n: number }>>(
      `select coalesce(sum(count), 0)::float8 as n from idempotency_stats
       where bucket < $1::timestamptz and outcome = any($2::text[])`,
      new Date(first).toISOString(),
      [...DUPLICATE_OUTCOMES],
    ),
  ]);

  const times = Array.from({ length: points }, (_, index) => first + index * stepMs);
  const byProcedure = new Map<string, Map<number, Record<Outcome, number>>>();
  const duplicatesAt = new Map<number, number>();
  for (const row of rows) {
    if (!isOutcome(row.outcome)) continue;
    const t = row.t.getTime();
    if (t > last) continue; // counted by a process whose clock runs ahead
    let series = byProcedure.get(row.procedure);
    if (!series) {
      series = new Map();
      byProcedure.set(row.procedure, series);
    }
    const point = series.get(t) ?? zeroOutcomes();
    point[row.outcome] += row.n;
    series.set(t, point);
    if (DUPLICATE_OUTCOMES.includes(row.outcome)) duplicatesAt.set(t, (duplicatesAt.get(t) ?? 0) + row.n);
  }

  const procedures = [...byProcedure.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([procedure, series]) => {
      const totals = zeroOutcomes();
      const pointsOut = times.map((t) => {
        const counts = series.get(t) ?? zeroOutcomes();
        for (const outcome of OUTCOMES) totals[outcome] += counts[outcome];
        return { t, ...counts };
      });
      return { procedure, points: pointsOut, totals };
    });

  let runningTotal = before[0]?.n ?? 0;
  const duplicatesPrevented = times.map((t) => {
    const inBucket = duplicatesAt.get(t) ?? 0;
    runningTotal += inBucket;
    return { t, inBucket, runningTotal };
  });

  return {
    range,
    stepSeconds,
    procedures,
    duplicatesPrevented,
    duplicatesPreventedTotal: runningTotal,
  };
}
