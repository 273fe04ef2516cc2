/** From the rounds to the figures: medians of per-round values and of per-round ratios. */

import { median } from '../stats.ts';
import { type ArmId, arms, type VariantId, variants } from './contenders.ts';
import type { ArmSummary, BurstOutcome, Probe, RoundResult, VariantSummary } from './results.ts';

export function summarizeArm(id: ArmId, rounds: RoundResult[]): ArmSummary {
  const arm = arms[id];
  const summary: ArmSummary = {
    id,
    label: arm.label,
    store: arm.store,
    baseline: arm.baseline,
    p1Ms: median(rounds.map((r) => r.p1Ms[id])),
    p2Rps: median(rounds.map((r) => r.p2Rps[id])),
    failures: rounds.reduce((sum, r) => sum + (r.failures[id] ?? 0), 0),
  };
  const baseline = arm.baseline;
  if (baseline === null) return summary;
  return {
    ...summary,
    p1Ratio: median(rounds.map((r) => r.p1Ms[id] / r.p1Ms[baseline])),
    p1RatioVsNone: median(rounds.map((r) => r.p1Ms[id] / r.p1Ms.none)),
    p2Ratio: median(rounds.map((r) => r.p2Rps[id] / r.p2Rps[baseline])),
    p2RatioVsNone: median(rounds.map((r) => r.p2Rps[id] / r.p2Rps.none)),
    firstP50: median(rounds.map((r) => r.replay[id]?.firstP50 ?? Number.NaN)),
    replayP50: median(rounds.map((r) => r.replay[id]?.replayP50 ?? Number.NaN)),
    replayRatio: median(
      rounds.map((r) => (r.replay[id]?.replayP50 ?? Number.NaN) / (r.replay[id]?.firstP50 ?? Number.NaN)),
    ),
    replayRows: rounds.reduce((sum, r) => sum + (r.replay[id]?.rowsWritten ?? 0), 0),
  };
}

export function summarizeVariant(id: VariantId, rounds: RoundResult[], probe: Probe): VariantSummary {
  const pick = (which: 'oneInstance' | 'twoInstances') => {
    const outcomes = rounds
      .map((r) => r.bursts[id]?.[which])
      .filter((o): o is BurstOutcome => o !== undefined);
    return {
      executionsPerRun: outcomes.map((o) => o.executions),
      statusesPerRun: outcomes.map((o) => o.statuses),
    };
  };
  const two = pick('twoInstances');
  return {
    id,
    label: variants[id].label,
    oneInstance: pick('oneInstance'),
    ...(two.executionsPerRun.length > 0 ? { twoInstances: two } : {}),
    probe,
  };
}
