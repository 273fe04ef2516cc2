/** P2: throughput at `p2Connections` connections, protected against unprotected. */
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { cannon, type Measured } from '../requests.ts';
import { median } from '../stats.ts';
import { type Figure, figure } from '../summary.ts';
import { type MeasurePair, measureBoth } from './both-procedures.ts';
import type { CurveLevel } from './p2-curve.ts';

/** Answered requests per second, per procedure. */
export type P2Run = Record<Measured, number>;

export const measure: MeasurePair = (url, options, run, order) =>
  measureBoth(order, async (procedure) => {
    const sample = await cannon(url, procedure, {
      connections: options.p2Connections,
      duration: options.p2Seconds,
    });
    const rps = sample.ok / sample.seconds;
    log(`  run ${run + 1} P2 ${procedure.padEnd(11)} ${rps.toFixed(0)} req/s (${sample.failed} failed)`);
    return { value: rps, failed: sample.failed };
  });

/** The figure's detail also gives the ratio at every connection count of the curve. */
export function figures(runs: P2Run[], curve: CurveLevel[], options: BenchOptions): Figure[] {
  return [
    figure({
      id: 'P2',
      label: 'P2 throughput @32, protected / unprotected',
      runs: runs.map((r) => r.protected / r.unprotected),
      detail: `${median(runs.map((r) => r.protected)).toFixed(0)} / ${median(runs.map((r) => r.unprotected)).toFixed(0)} req/s (test server, ${options.p2Seconds} s each); against connections: ${curve.map((l) => `@${l.connections} ${l.ratio.toFixed(2)}`).join(', ')}`,
    }),
  ];
}
