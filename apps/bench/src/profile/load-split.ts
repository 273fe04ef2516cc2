/**
 * How load-probe.ts splits a request's time in the server: each moment counted once, as the first of PHASES that
 * applies then (a request could hold or wait for two connections at once: Prisma may send an operation's
 * independent reads together). No imports: the probe runs inside the app's server process.
 */

/** What a request is doing at a moment, in the order the split counts them. */
export const PHASES = ['holdTransaction', 'holdQuery', 'waitTransaction', 'waitQuery', 'other'] as const;
export type Phase = (typeof PHASES)[number];

/** A checkout's wait or hold; `to` null while it lasts. */
export interface Interval {
  phase: Exclude<Phase, 'other'>;
  from: number;
  to: number | null;
}

/** Adds a request's time [start, end] to `split`, each moment to the first phase of PHASES that holds then. */
export function splitInto(
  split: Record<Phase, number>,
  intervals: Interval[],
  start: number,
  end: number,
): void {
  const clipped = intervals.map((i) => ({
    ...i,
    from: Math.max(start, i.from),
    to: Math.min(end, i.to ?? end),
  }));
  const edges = [...new Set([start, end, ...clipped.flatMap((i) => [i.from, i.to])])]
    .filter((t) => t >= start && t <= end)
    .sort((a, b) => a - b);
  for (let k = 0; k + 1 < edges.length; k += 1) {
    const from = edges[k] ?? 0;
    const to = edges[k + 1] ?? 0;
    const phase =
      PHASES.find((p) => clipped.some((i) => i.phase === p && i.from <= from && i.to >= to)) ?? 'other';
    split[phase] += to - from;
  }
}
