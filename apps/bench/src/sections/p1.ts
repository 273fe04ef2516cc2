/** P1: a first execution's p50 latency at 1 connection, protected against unprotected. */
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { cannon, type Measured } from '../requests.ts';
import { median, medianMs } from '../stats.ts';
import { type Figure, figure } from '../summary.ts';
import { type MeasurePair, measureBoth } from './both-procedures.ts';

/** p50 in ms per procedure. */
export type P1Run = Record<Measured, number>;

export const measure: MeasurePair = (url, options, run, order) =>
  measureBoth(order, async (procedure) => {
    const sample = await cannon(url, procedure, { connections: 1, duration: options.p1Seconds });
    const p50 = median(sample.latencies);
    log(`  run ${run + 1} P1 ${procedure.padEnd(11)} p50 ${p50.toFixed(2)} ms (${sample.ok} ok)`);
    return { value: p50, failed: sample.failed };
  });

export function figures(runs: P1Run[], options: BenchOptions): Figure[] {
  return [
    figure({
      id: 'P1',
      label: 'P1 first execution p50, protected / unprotected',
      runs: runs.map((r) => r.protected / r.unprotected),
      detail: `${medianMs(runs.map((r) => r.protected))} / ${medianMs(runs.map((r) => r.unprotected))} (test server, 1 connection, ${options.p1Seconds} s each)`,
    }),
  ];
}
