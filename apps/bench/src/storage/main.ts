/**
 * `pnpm bench:storage`: P6 (cleanup of 1 M expired keys, worst claim latency while it runs), partitioned expiry,
 * and growth (claim / replay with 10 k and 1 M rows; 10 M with BENCH_GROWTH_ROWS=10000,1000000,10000000).
 * Needs no build. Prints the tables and writes the `storage` entry of docs/bench-results.json (the rest of
 * that file is `pnpm bench`'s, which keeps this entry when it rewrites the file).
 *
 * Knobs (environment): DATABASE_URL (server; a scratch database is created and dropped on it),
 * BENCH_STORAGE_SECTIONS (p6,partitions,growth), BENCH_P6_ROWS (1000000), BENCH_P6_LIVE_ROWS (200000),
 * BENCH_P6_BATCH (0 = the worker's default), BENCH_P6_VARIANTS (e.g. store:1000,worker:5000),
 * BENCH_P6_BASELINE_SECONDS (5), BENCH_P6_CHECKPOINT (1: checkpoint the load first; 0: the control),
 * BENCH_P6_NO_INDEX_SECONDS (0 = skip; else the limit for the cleanup without the
 * expires_at index), BENCH_STORAGE_SCOPES (100000), BENCH_PARTITION_ROWS (1000000; 0 skips),
 * BENCH_GROWTH_ROWS (10000,1000000), BENCH_GROWTH_SAMPLES (1000), BENCH_GROWTH_HEAVY_EVERY (100),
 * BENCH_GROWTH_HEAVY_SAMPLES (200),
 * BENCH_STORAGE_OUTPUT (another JSON file to merge the `storage` entry into, e.g. for a one-off 10 M run),
 * BENCH_VERBOSE=1 (stack trace on failure).
 */
import path from 'node:path';
import { messageOf, repoRoot, useExternalServer } from '../repository.ts';
import { readStorageSettings, runStorageBench, storageMarkdown, Teardown } from './index.ts';
import { RESULTS_FILE, writeStorageResults } from './results-file.ts';

const log = (line: string) => console.log(`[bench:storage] ${line}`);
const teardown = new Teardown();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping and dropping the scratch database`);
    void teardown.run().finally(() => process.exit(130));
  });
}

function knobs(): string {
  const set = Object.entries(process.env)
    .filter(([name]) => name.startsWith('BENCH_'))
    .map(([name, value]) => `${name}=${value}`)
    .sort();
  return [...set, 'pnpm bench:storage'].join(' ');
}

try {
  const settings = readStorageSettings();
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const result = await runStorageBench({
    adminUrl: server.adminUrl,
    settings,
    teardown,
    log,
    command: knobs(),
  });
  console.log('');
  console.log(storageMarkdown(result));
  console.log('');
  const resultsFile = process.env.BENCH_STORAGE_OUTPUT || RESULTS_FILE;
  writeStorageResults(result, resultsFile);
  log(
    `done in ${result.seconds.toFixed(0)} s; wrote the "storage" entry of ${path.relative(repoRoot, resultsFile)}`,
  );
} catch (error) {
  console.error(`[bench:storage] ${messageOf(error)}`);
  if (process.env.BENCH_VERBOSE === '1') console.error(error);
  process.exitCode = 1;
} finally {
  await teardown.run();
}
