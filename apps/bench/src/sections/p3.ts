/**
 * P3: a replay's p50 against a first execution's, 1 connection: `p3Keys` keys are executed once (first
 * executions), then each is sent again (replays), and the replays must write no row. The floor: the route with no
 * database work of its own (`bench.noop`), what any answer costs at least.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { cycleThrough } from '../cannon.ts';
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { cannon, countEffects } from '../requests.ts';
import { median, medianMs } from '../stats.ts';
import { type Figure, figure } from '../summary.ts';
import type { Measurement } from './context.ts';

export interface P3Run {
  firstP50: number;
  replayP50: number;
  /** Rows written while the replays ran: 0 unless a replay executed the procedure again. */
  replayEffects: number;
  noopP50: number;
}

export async function measure(
  url: string,
  client: pg.Client,
  options: BenchOptions,
  run: number,
): Promise<Measurement<P3Run>> {
  const keys = Array.from({ length: options.p3Keys }, () => randomUUID());
  const eachKeyOnce = () =>
    cannon(url, 'protected', { connections: 1, amount: keys.length, nextKey: cycleThrough(keys) });
  const prime = await eachKeyOnce();
  const before = await countEffects(client);
  const replay = await eachKeyOnce();
  const replayEffects = (await countEffects(client)) - before;
  const noop = await cannon(url, 'noop', { connections: 1, amount: options.p3Keys });
  const p3 = {
    firstP50: median(prime.latencies),
    replayP50: median(replay.latencies),
    replayEffects,
    noopP50: median(noop.latencies),
  };
  log(
    `  run ${run + 1} P3 first p50 ${p3.firstP50.toFixed(2)} ms, replay p50 ${p3.replayP50.toFixed(2)} ms, ` +
      `rows written by the replays: ${replayEffects}; the route with no database work of its own p50 ${p3.noopP50.toFixed(2)} ms`,
  );
  return { value: p3, failures: prime.failed + replay.failed + noop.failed };
}

export function figures(runs: P3Run[], options: BenchOptions): Figure[] {
  const floor = median(runs.map((r) => r.noopP50 / r.firstP50));
  return [
    figure({
      id: 'P3',
      label: 'P3 replay p50 / first-execution p50',
      runs: runs.map((r) => r.replayP50 / r.firstP50),
      detail: `${medianMs(runs.map((r) => r.replayP50))} / ${medianMs(runs.map((r) => r.firstP50))} (${options.p3Keys} keys, 1 connection); rows written by replays: ${runs.reduce((sum, r) => sum + r.replayEffects, 0)}; floor: the route with no database work of its own ${medianMs(runs.map((r) => r.noopP50))} = ${floor.toFixed(2)} of a first execution`,
    }),
  ];
}
