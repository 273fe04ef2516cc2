/**
 * The storage section (src/storage/): P6, the worst claim while the worker deletes a table's expired keys, and
 * the growth series, in a scratch database of its own. Run last: its bulk loads and deletes write gigabytes of
 * WAL, which would slow the commits of whatever ran after it. With BENCH_STORAGE=0, or when it fails, the figures
 * the last storage run left in docs/bench-results.json are kept, and P6's detail says so.
 */
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { messageOf } from '../repository.ts';
import { runStorageBench } from '../storage/index.ts';
import type { StorageBenchResult } from '../storage/report.ts';
import { keptStorageResults } from '../storage/results-file.ts';
import { type Figure, figure } from '../summary.ts';
import { Teardown } from '../teardown.ts';
import type { SectionContext } from './context.ts';

export const name = 'storage (P6, growth)';

export function plannedSeconds({ storage }: BenchOptions): number {
  if (!storage) return 0;
  const p6 = storage.sections.has('p6') ? (storage.p6Rows + storage.p6LiveRows) / 25_000 + 15 : 0;
  const growth = storage.sections.has('growth')
    ? (storage.growthRows.at(-1) ?? 0) / 40_000 + storage.growthRows.length * 20
    : 0;
  return p6 + growth;
}

export interface StorageOutcome {
  /** This run's storage results, or those the last run left in docs/bench-results.json (JSON as read). */
  results: unknown;
  /** Why this run's section did not produce them (null when it did). */
  notRun: string | null;
}

export async function run({ options, stack, progress }: SectionContext): Promise<StorageOutcome> {
  const kept = keptStorageResults();
  if (!options.storage) return { results: kept, notRun: 'BENCH_STORAGE=0' };
  const teardown = new Teardown();
  stack.teardown.add(() => teardown.run());
  const result = await runStorageBench({
    adminUrl: stack.adminUrl,
    settings: options.storage,
    teardown,
    log: progress.logger((line) => log(`storage: ${line}`)),
    command: 'pnpm bench',
  }).catch((error: unknown) => ({ skipped: messageOf(error) }));
  await teardown.run();
  if ('skipped' in result) {
    log(`storage section failed: ${result.skipped}`);
    return { results: kept, notRun: result.skipped };
  }
  return { results: result, notRun: null };
}

/**
 * P6: the worst claim while the worker deletes the expired keys (its first cleanup run, the default batch) and
 * while a CHECKPOINT forced right after it writes out what the cleanup dirtied: the cleanup's full cost to the
 * server.
 */
export function figures({ results, notRun }: StorageOutcome): Figure[] {
  const p6 = (results as Partial<StorageBenchResult> | undefined)?.p6;
  const first = p6?.runs[0];
  if (!first) return [];
  // Kept results may come from an older harness, which did not time the forced checkpoint.
  const after = first.after as typeof first.during | undefined;
  return [
    figure({
      id: 'P6',
      label: 'P6 worst claim during the cleanup of expired keys and its checkpoint',
      // One cleanup run: a single measurement (its spread is the next run's).
      runs: [Math.max(first.during.worst, after?.worst ?? 0)],
      detail: `${first.loadedExpired.toLocaleString('en')} expired keys deleted in ${((first.cleanup?.ms ?? Number.NaN) / 1000).toFixed(1)} s (${first.label}); claims during it: p50 ${first.during.p50.toFixed(2)} / p99 ${first.during.p99.toFixed(2)} / worst ${first.during.worst.toFixed(1)} ms; WAL ${(first.walBytes / 2 ** 20).toFixed(0)} MiB${after ? `; during a CHECKPOINT forced right after it (${(first.afterCheckpointMs / 1000).toFixed(1)} s): p99 ${after.p99.toFixed(2)} / worst ${after.worst.toFixed(1)} ms` : ''}${first.checkpointMs === undefined ? '; the load NOT checkpointed first' : '; the load checkpointed first'}${notRun ? ` (NOT this run's: kept from the last storage run; this run's storage section: ${notRun})` : ''}`,
    }),
  ];
}
