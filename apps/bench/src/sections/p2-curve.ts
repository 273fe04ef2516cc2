/**
 * P2 against connections: protected and unprotected throughput at each of `curveConnections`, `curveRounds`
 * rounds per count, which goes first alternating from round to round. Drawn as the chart's curve; the ratios also
 * go into P2's detail.
 */
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { alternate, cannon, type Measured } from '../requests.ts';
import { median } from '../stats.ts';
import type { SectionContext } from './context.ts';

export const name = 'P2 against connections';

export function plannedSeconds(options: BenchOptions): number {
  return options.curveConnections.length * options.curveRounds * 2 * options.curveSeconds;
}

export interface CurveLevel {
  connections: number;
  protectedRps: number;
  unprotectedRps: number;
  /** Median of the per-round ratios. */
  ratio: number;
  rounds: Array<Record<Measured, number>>;
}

export async function run({ options, stack, progress }: SectionContext): Promise<CurveLevel[]> {
  const levels: CurveLevel[] = [];
  for (const [index, connections] of options.curveConnections.entries()) {
    progress.run(index + 1, options.curveConnections.length);
    const rounds: Array<Record<Measured, number>> = [];
    for (let round = 0; round < options.curveRounds; round += 1) {
      const rps = { protected: Number.NaN, unprotected: Number.NaN };
      for (const procedure of alternate(round)) {
        const sample = await cannon(stack.url, procedure, { connections, duration: options.curveSeconds });
        rps[procedure] = sample.ok / sample.seconds;
      }
      rounds.push(rps);
    }
    const level = {
      connections,
      protectedRps: median(rounds.map((r) => r.protected)),
      unprotectedRps: median(rounds.map((r) => r.unprotected)),
      ratio: median(rounds.map((r) => r.protected / r.unprotected)),
      rounds,
    };
    log(
      `  @${connections}: protected ${level.protectedRps.toFixed(0)} req/s, unprotected ${level.unprotectedRps.toFixed(0)} req/s, ratio ${level.ratio.toFixed(2)}`,
    );
    levels.push(level);
  }
  return levels;
}
