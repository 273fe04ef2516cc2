/**
 * The peers on the same handler (src/peers/): Idem and the idempotency libraries from npm, each in a server
 * process of its own on this run's scratch database. Its figures: the peers ratio (Idem on bare tRPC against the
 * same route unprotected) and P4 (Idem's added p50 against the best Redis peer's). Skipped with BENCH_PEERS=0; a
 * failure (no Redis, a server that does not start) is recorded as the reason it was skipped.
 */
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { type ArmId, armIds, arms, redisPeerIds } from '../peers/contenders.ts';
import type { PeersResult, PeersSkipped } from '../peers/results.ts';
import { runPeerBench } from '../peers/run-peers.ts';
import { messageOf } from '../repository.ts';
import { median } from '../stats.ts';
import { type Figure, figure, signedMs } from '../summary.ts';
import type { SectionContext } from './context.ts';

export const name = 'peers';

export function plannedSeconds({ peers }: BenchOptions): number {
  if (!peers) return 0;
  const round = armIds.length * (peers.p1Seconds + peers.p2Seconds) + (4 * peers.replayKeys * 5) / 1000 + 6;
  return 15 + peers.runs * round;
}

export async function run({ options, stack, progress }: SectionContext): Promise<PeersResult | PeersSkipped> {
  if (!options.peers) return { skipped: 'BENCH_PEERS=0' };
  return runPeerBench({
    databaseUrl: stack.databaseUrl,
    settings: options.peers,
    log: progress.logger((line) => log(`peers: ${line}`)),
    verbose: options.verbose,
  }).catch((error: unknown) => ({ skipped: messageOf(error) }));
}

export function figures(peers: PeersResult | PeersSkipped): Figure[] {
  if ('skipped' in peers) return [];
  /** A round's p50 of the arm's protected route minus its own framework's unprotected route. */
  const added = (round: PeersResult['rounds'][number], id: ArmId) => {
    const baseline = arms[id].baseline;
    return baseline ? round.p1Ms[id] - round.p1Ms[baseline] : Number.NaN;
  };
  /** A round's p50 of the arm's protected route ÷ its own framework's unprotected route. */
  const ratio = (round: PeersResult['rounds'][number], id: ArmId) => {
    const baseline = arms[id].baseline;
    return baseline ? round.p1Ms[id] / round.p1Ms[baseline] : Number.NaN;
  };
  // P4 is the ratio of the two medians over the rounds, not the median of per-round ratios: a per-round ratio
  // is meaningless in a round where the peer's added cost is within noise of zero or below it.
  const idemAdded = median(peers.rounds.map((round) => added(round, 'idem')));
  const bestAdded = median(
    peers.rounds.map((round) => Math.min(...redisPeerIds.map((id) => added(round, id)))),
  );
  const p4 = bestAdded > 0 ? idemAdded / bestAdded : Number.NaN;
  const redisRatios = redisPeerIds
    .map((id) => `${arms[id].label} ${peers.arms.find((arm) => arm.id === id)?.p1Ratio?.toFixed(2) ?? '?'}`)
    .join(', ');
  return [
    figure({
      id: 'peers',
      label: 'peers: Idem on bare tRPC ÷ the same route unprotected',
      // Their median is the arm's p1Ratio (peers/summarize.ts).
      runs: peers.rounds.map((round) => ratio(round, 'idem')),
      detail: `p50 @1 connection, median of ${peers.rounds.length} rounds; the Redis peers on their own frameworks: ${redisRatios}`,
    }),
    figure({
      id: 'P4',
      label: "P4 Idem's added p50 ÷ the best Redis peer's",
      value: p4,
      // Per round: the round's own ratio (NaN when the best peer's added cost was ≤ 0 in that round).
      runs: peers.rounds.map((round) => {
        const best = Math.min(...redisPeerIds.map((id) => added(round, id)));
        return best > 0 ? added(round, 'idem') / best : Number.NaN;
      }),
      detail: `Idem ${signedMs(idemAdded)} vs the best Redis peer ${signedMs(bestAdded)} (median over the rounds of each one's p50 minus its own framework's unprotected p50; n/a when the peer's is ≤ 0, i.e. noise); the spread: each round's own ratio`,
    }),
  ];
}
