/**
 * `pnpm bench:peers`: the peers section alone (it also runs inside `pnpm bench`, after the main figures).
 * Creates a scratch database on DATABASE_URL's server (default postgresql://postgres@127.0.0.1:5432),
 * migrates it (Idem needs `idempotency_keys`), creates `bench_effects` as apps/bench/src/run.ts does, runs the
 * section, prints its tables and merges them into docs/bench-results.json under `peers` (the rest of the file is
 * kept). Needs no `pnpm build`. Knobs: see config.ts (BENCH_PEERS_*, BENCH_REDIS_URL) and BENCH_VERBOSE=1.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import {
  createDatabase,
  dropDatabase,
  messageOf,
  migrateDatabase,
  redact,
  repoRoot,
  scratchDatabaseName,
  useExternalServer,
  withDatabase,
} from '../repository.ts';
import { peerSettingsFromEnv } from './config.ts';
import { formatPeersReport } from './report.ts';
import { runPeerBench } from './run-peers.ts';

const RESULTS_FILE = path.join(repoRoot, 'docs/bench-results.json');

function log(line: string): void {
  console.log(`[bench:peers] ${line}`);
}

/** docs/bench-results.json with `peers` replaced; written whole, so a reader never sees half a file. */
function mergeIntoResults(peers: unknown): void {
  const existing: Record<string, unknown> = existsSync(RESULTS_FILE)
    ? (JSON.parse(readFileSync(RESULTS_FILE, 'utf8')) as Record<string, unknown>)
    : {};
  writeFileSync(RESULTS_FILE, `${JSON.stringify({ ...existing, peers }, null, 2)}\n`);
}

async function main() {
  const settings = peerSettingsFromEnv();
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const name = scratchDatabaseName('idem_bench_peers');
  const databaseUrl = await createDatabase(server.adminUrl, name);
  let dropping: Promise<void> | undefined;
  const drop = () => {
    dropping ??= dropDatabase(server.adminUrl, name).catch((error) =>
      log(`drop ${name}: ${messageOf(error)}`),
    );
    return dropping;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      log(`${signal}: dropping the scratch database`);
      void drop().finally(() => process.exit(130));
    });
  try {
    log(`scratch database ${name} on ${redact(withDatabase(server.adminUrl, ''))}`);
    await migrateDatabase(databaseUrl);
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client
      .query(
        'create table if not exists bench_effects (id bigserial primary key, n int, at timestamptz default now())',
      )
      .finally(() => client.end());
    const result = await runPeerBench({
      databaseUrl,
      settings,
      log,
      verbose: process.env.BENCH_VERBOSE === '1',
    });
    console.log('');
    console.log(formatPeersReport(result));
    mergeIntoResults(result);
    log('merged into docs/bench-results.json (peers)');
  } finally {
    await drop();
  }
}

main().catch((error) => {
  console.error(`[bench:peers] ${messageOf(error)}`);
  process.exitCode = 1;
});
