/**
 * P5: `p5Burst` requests with ONE key at once: how many executions (must be 1), and the burst's wall time against
 * the same burst unprotected with distinct keys (what serving that many requests costs at all). The floors, against
 * the same control: the same-key burst again once its key has finished (all replays), and the burst to the route
 * with no database work of its own. The duplicates of the first burst cannot cost less than replays, nor replays
 * less than the bare route.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { burst, countEffects, notOk } from '../requests.ts';
import { median, medianMs } from '../stats.ts';
import { type Figure, figure } from '../summary.ts';
import type { Measurement } from './context.ts';

/** `bench_effects.n` of run i's same-key burst is MARKER_BASE + i; every other burst writes n = 2. */
const MARKER_BASE = 1_000_000;

export interface P5Run {
  executions: number;
  wallMs: number;
  controlWallMs: number;
  replayWallMs: number;
  noopWallMs: number;
  /** The same-key burst's answers by status. */
  statuses: Record<string, number>;
}

export async function measure(
  url: string,
  client: pg.Client,
  options: BenchOptions,
  run: number,
): Promise<Measurement<P5Run>> {
  const size = options.p5Burst;
  // Not timed: the client's keep-alive sockets have closed during P3, and the first burst would otherwise open
  // new ones while the bursts compared with it found them open.
  await burst(url, 'noop', { size, keyOf: randomUUID, n: 2 });
  const marker = MARKER_BASE + run;
  const key = randomUUID();
  const statuses: Record<string, number> = {};
  const wallMs = await burst(url, 'protected', { size, keyOf: () => key, n: marker, statuses });
  const executions = await countEffects(client, marker);
  // Every burst's non-2xx answers count as failures: a failing control or floor would look cheap.
  const floorStatuses: Record<string, number> = {};
  const controlWallMs = await burst(url, 'unprotected', {
    size,
    keyOf: randomUUID,
    n: 2,
    statuses: floorStatuses,
  });
  const replayWallMs = await burst(url, 'protected', {
    size,
    keyOf: () => key,
    n: marker,
    statuses: floorStatuses,
  });
  const noopWallMs = await burst(url, 'noop', { size, keyOf: randomUUID, n: 2, statuses: floorStatuses });
  log(
    `  run ${run + 1} P5 ${size} same-key requests: ${executions} execution(s), wall ${wallMs.toFixed(1)} ms, ` +
      `statuses ${JSON.stringify(statuses)}; unprotected ${size}-burst (distinct keys) ${controlWallMs.toFixed(1)} ms; ` +
      `${size} replays ${replayWallMs.toFixed(1)} ms; ${size} with no database work ${noopWallMs.toFixed(1)} ms`,
  );
  return {
    value: { executions, wallMs, controlWallMs, replayWallMs, noopWallMs, statuses },
    failures: notOk(statuses) + notOk(floorStatuses),
  };
}

export function figures(runs: P5Run[], options: BenchOptions): Figure[] {
  const size = options.p5Burst;
  const perRun = (wall: (r: P5Run) => number) => runs.map((r) => wall(r) / r.controlWallMs);
  const ofControl = (wall: (r: P5Run) => number) => median(perRun(wall));
  return [
    figure({
      id: 'P5-executions',
      label: `P5 executions of ${size} same-key requests`,
      // The worst run, not the median: one run with two executions is a failure.
      value: Math.max(...runs.map((r) => r.executions)),
      runs: runs.map((r) => r.executions),
      detail: `per run: ${runs.map((r) => r.executions).join(', ')}; statuses: ${runs.map((r) => JSON.stringify(r.statuses)).join(' ')}`,
    }),
    figure({
      id: 'P5',
      label: 'P5 same-key burst wall / distinct-key burst',
      runs: perRun((r) => r.wallMs),
      detail: `${medianMs(runs.map((r) => r.wallMs))} / ${medianMs(runs.map((r) => r.controlWallMs))} (${size} at once; the control: unprotected, distinct keys); floors, same control: ${size} replays of a finished key ${ofControl((r) => r.replayWallMs).toFixed(2)}, ${size} requests with no database work of their own ${ofControl((r) => r.noopWallMs).toFixed(2)}`,
    }),
  ];
}
