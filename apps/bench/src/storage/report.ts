/** The storage bench's result: its JSON shape and its Markdown tables. */
import type { CleanupRun, P6Result } from './cleanup-p6.ts';
import type { GrowthStep } from './growth.ts';
import { formatMs, type LatencySummary } from './latency.ts';
import type { PartitionResult } from './partitioned-expiry.ts';
import { formatBytes } from './table-size.ts';

export const P6_TARGETS = { cleanupSeconds: 10, worstClaimMs: 50 };

export interface StorageBenchResult {
  date: string;
  command: string;
  machine: { cpus: number; node: string; postgres: string; platform: string; sharedBuffers: string };
  settings: Record<string, unknown>;
  seconds: number;
  p6?: P6Result & { targets: typeof P6_TARGETS; met: { cleanup: boolean; worstClaim: boolean } };
  partitions?: PartitionResult;
  growth?: GrowthStep[];
}

const triple = (s: LatencySummary) => `${formatMs(s.p50)} / ${formatMs(s.p99)} / ${formatMs(s.worst)}`;
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const count = (n: number) => n.toLocaleString('en');

export function p6Table(runs: CleanupRun[]): string {
  const lines = [
    '| cleanup | plan of a batch | expired keys | time | batches | WAL | claims before: p50 / p99 / worst (ms) | claims during: p50 / p99 / worst (ms) | claims during a CHECKPOINT right after it: p50 / p99 / worst (ms) | failed claims | live keys kept |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const run of runs) {
    const time = run.cleanup
      ? `**${seconds(run.cleanup.ms)}**`
      : `not done in ${run.limitSeconds} s (${count(run.loadedExpired - run.expiredLeft)} deleted)`;
    lines.push(
      `| ${run.label} | ${run.plan} | ${count(run.loadedExpired)} | ${time} | ${run.cleanup?.batches ?? '–'} | ` +
        `${formatBytes(run.walBytes)} | ` +
        `${triple(run.baseline)} (n=${run.baseline.count}) | **${triple(run.during)}** (n=${run.during.count}) | ` +
        // Runs recorded before the after-window existed have none.
        `${run.after ? `${triple(run.after)} (${(run.afterCheckpointMs / 1000).toFixed(1)} s, n=${run.after.count})` : '–'} | ` +
        `${run.claimErrors.length} | ${count(run.liveKept)}/${count(run.liveExpected)} |`,
    );
  }
  return lines.join('\n');
}

export function partitionTable(result: PartitionResult): string {
  const lines = [
    '| operation on a partition of expired keys | rows | time | claims overlapping it: p50 / p99 / worst (ms) |',
    '|---|---|---|---|',
  ];
  for (const [label, operation] of [
    ['DROP TABLE', result.drop],
    ['DETACH PARTITION … CONCURRENTLY, then DROP TABLE', result.detach],
  ] as const) {
    const steps = operation.steps.map((step) => `${step.ms.toFixed(1)} ms`).join(' + ');
    lines.push(
      `| ${label} | ${count(operation.rows)} | **${operation.totalMs.toFixed(1)} ms** (${steps}) | ` +
        `${triple(operation.overlappingClaims)} (n=${operation.overlappingClaims.count}) |`,
    );
  }
  lines.push(
    `| (no operation: baseline claims) | – | – | ${triple(result.baseline)} (n=${result.baseline.count}) |`,
  );
  return lines.join('\n');
}

export function growthTable(steps: GrowthStep[]): string {
  const names = [...new Set(steps.flatMap((step) => Object.keys(step.figures)))];
  const lines = [
    `| rows | load (one INSERT … SELECT) | VACUUM ANALYZE | table + indexes | bytes/row | keys/principal (heavy) | ${names.map((name) => `${name} p50 / p99`).join(' | ')} |`,
    `|---|---|---|---|---|---|${names.map(() => '---').join('|')}|`,
  ];
  for (const step of steps) {
    lines.push(
      `| ${count(step.rows)} | ${seconds(step.loadMs)} | ${seconds(step.vacuumMs)} | ${formatBytes(step.size.totalBytes)} | ` +
        `${step.size.bytesPerRow.toFixed(0)} | ${step.keysPerScope.toFixed(1)} (${count(step.heavyScopeKeys)}) | ` +
        `${names
          .map((name) => {
            const figure = step.figures[name];
            return figure ? `${formatMs(figure.p50)} / ${formatMs(figure.p99)}` : '–';
          })
          .join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

export function emptyBatchTable(steps: GrowthStep[]): string {
  const lines = [
    '| rows | one cleanup batch, nothing expired: with the expires_at index | without it | rebuilding the index |',
    '|---|---|---|---|',
  ];
  for (const step of steps) {
    const { withIndex, withoutIndex, indexRebuildMs } = step.emptyBatch;
    lines.push(
      `| ${count(step.rows)} | ${formatMs(withIndex.ms)} ms (${withIndex.plan}) | ` +
        `**${formatMs(withoutIndex.ms)} ms** (${withoutIndex.plan}) | ${seconds(indexRebuildMs)} |`,
    );
  }
  return lines.join('\n');
}

export function inFlightIndexTable(steps: GrowthStep[]): string {
  const migrated = steps[0]?.inFlightIndexMigrated ?? false;
  const names = [...new Set(steps.flatMap((step) => Object.keys(step.toggled.figures)))];
  const without = migrated ? 'toggled' : 'figures';
  const withIndex = migrated ? 'figures' : 'toggled';
  const lines = [
    `| rows | ${names.map((name) => `${name} p50 / p99: no index → partial index`).join(' | ')} | index build |`,
    `|---|${names.map(() => '---').join('|')}|---|`,
  ];
  for (const step of steps) {
    const pick = (which: string, name: string) =>
      which === 'figures' ? step.figures[name] : step.toggled.figures[name];
    lines.push(
      `| ${count(step.rows)} | ${names
        .map((name) => {
          const before = pick(without, name);
          const after = pick(withIndex, name);
          return before && after
            ? `${formatMs(before.p50)} / ${formatMs(before.p99)} → **${formatMs(after.p50)} / ${formatMs(after.p99)}**`
            : '–';
        })
        .join(' | ')} | ${seconds(step.toggled.indexBuildMs)} |`,
    );
  }
  return lines.join('\n');
}

export function storageMarkdown(result: StorageBenchResult): string {
  const parts: string[] = [];
  if (result.p6) {
    parts.push(
      `P6 targets: cleanup ≤ ${result.p6.targets.cleanupSeconds} s — ${result.p6.met.cleanup ? 'met' : '**not met**'}; ` +
        `worst claim during it and its checkpoint ≤ ${result.p6.targets.worstClaimMs} ms — ${result.p6.met.worstClaim ? 'met' : '**not met**'}`,
      '',
      p6Table(result.p6.runs),
    );
  }
  if (result.partitions) parts.push('', partitionTable(result.partitions));
  if (result.growth)
    parts.push(
      '',
      growthTable(result.growth),
      '',
      inFlightIndexTable(result.growth),
      '',
      emptyBatchTable(result.growth),
    );
  return parts.join('\n');
}
