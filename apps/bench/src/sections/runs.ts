/**
 * The main section: `runs` runs of P1, P2, P3 and P5, in that order within each run, after a warm-up. P1 and P2
 * measure protected and unprotected back to back, which goes first alternating from run to run.
 */
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { alternate, cannon } from '../requests.ts';
import type { SectionContext } from './context.ts';
import * as p1 from './p1.ts';
import * as p2 from './p2.ts';
import * as p3 from './p3.ts';
import * as p5 from './p5.ts';

export const name = 'main (P1 P2 P3 P5)';

/** Seconds on a quiet 2-core machine: the timed load plus fixed costs (for the time left). */
export function plannedSeconds(options: BenchOptions): number {
  return (
    4 + options.runs * (2 * options.p1Seconds + 2 * options.p2Seconds + (options.p3Keys * 2 * 6) / 1000 + 1)
  );
}

export interface MainRun {
  p1: p1.P1Run;
  p2: p2.P2Run;
  p3: p3.P3Run;
  p5: p5.P5Run;
  /** Non-2xx answers and connection errors in this run. */
  failures: number;
}

export async function run({ options, stack, progress }: SectionContext): Promise<MainRun[]> {
  log('warm-up (JIT, connection pools): 2 s per procedure at 8 connections');
  for (const procedure of ['protected', 'unprotected'] as const) {
    await cannon(stack.url, procedure, { connections: 8, duration: 2 });
  }
  const runs: MainRun[] = [];
  for (let index = 0; index < options.runs; index += 1) {
    progress.run(index + 1, options.runs);
    const order = alternate(index);
    const first = await p1.measure(stack.url, options, index, order);
    const throughput = await p2.measure(stack.url, options, index, order);
    const replay = await p3.measure(stack.url, stack.client, options, index);
    const burst = await p5.measure(stack.url, stack.client, options, index);
    runs.push({
      p1: first.value,
      p2: throughput.value,
      p3: replay.value,
      p5: burst.value,
      failures: first.failures + throughput.failures + replay.failures + burst.failures,
    });
  }
  return runs;
}

/** Non-2xx answers and connection errors over all runs. */
export const failures = (runs: MainRun[]) => runs.reduce((sum, r) => sum + r.failures, 0);
