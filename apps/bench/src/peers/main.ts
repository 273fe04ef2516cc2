/**
 * `pnpm bench:peers`: the peers section alone (it also runs inside `pnpm bench`, after the main figures).
 * On a scratch database of its own (scratch-database.ts), runs the section, prints its tables and merges them
 * into docs/bench-results.json under `peers` and `peersVersusRedis` (the rest of the file is kept), and issue 32's
 * table into docs/BENCHMARKS.md. Needs no `pnpm build`. Knobs: see config.ts (BENCH_PEERS_*, BENCH_REDIS_URL) and BENCH_VERBOSE=1.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { messageOf, repoRoot } from '../repository.ts';
import { readPeerSettings } from './config.ts';
import { runConformanceSection } from './conformance.ts';
import { formatPeersReport } from './report.ts';
import { runPeerBench } from './run-peers.ts';
import { withPeersDatabase } from './scratch-database.ts';
import { writeVersusRedis } from './versus-redis.ts';

const RESULTS_FILE = path.join(repoRoot, 'docs/bench-results.json');

function log(line: string): void {
  console.log(`[bench:peers] ${line}`);
}

/** docs/bench-results.json with these keys replaced; written whole, so a reader never sees half a file. */
function mergeIntoResults(keys: Record<string, unknown>): void {
  const existing: Record<string, unknown> = existsSync(RESULTS_FILE)
    ? (JSON.parse(readFileSync(RESULTS_FILE, 'utf8')) as Record<string, unknown>)
    : {};
  writeFileSync(RESULTS_FILE, `${JSON.stringify({ ...existing, ...keys }, null, 2)}\n`);
}

async function main() {
  const settings = readPeerSettings();
  await withPeersDatabase(log, async (databaseUrl) => {
    const result = await runPeerBench({
      databaseUrl,
      settings,
      log,
      verbose: process.env.BENCH_VERBOSE === '1',
    });
    console.log('');
    console.log(formatPeersReport(result));
    const peersVersusRedis = writeVersusRedis(result, 'pnpm bench:peers');
    mergeIntoResults({ peers: result, peersVersusRedis });
    log(
      "merged into docs/bench-results.json (peers, peersVersusRedis) and issue 32's table into docs/BENCHMARKS.md",
    );
    await runConformanceSection(databaseUrl, settings, log);
  });
}

main().catch((error) => {
  console.error(`[bench:peers] ${messageOf(error)}`);
  process.exitCode = 1;
});
