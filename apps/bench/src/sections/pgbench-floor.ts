/**
 * The pgbench floor: the claim, the handler's insert and the completion in one transaction against the insert
 * transaction alone, as SQL with no application in between (pgbench, 1 client, prepared statements as the store's
 * are): what the layer's statements cost Postgres at least. `runs` runs of `pgbenchSeconds`; 0 skips it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { median } from '../stats.ts';
import { type Figure, figure } from '../summary.ts';
import type { SectionContext, Skipped } from './context.ts';

export const name = 'pgbench floor';

export function plannedSeconds(options: BenchOptions): number {
  return options.pgbenchSeconds === 0 ? 0 : options.runs * options.pgbenchSeconds;
}

const CLAIM_SQL = `\\set n random(1, 1000000)
\\set k random(1, 9000000000000000)
begin;
insert into idempotency_keys as k
    (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at, replay_count)
  values ('pgbench', 'bench.protected', 'k' || :k, repeat('a', 64), 'processing',
    '00000000-0000-0000-0000-000000000001'::uuid, now() + make_interval(secs => 30), now(),
    now() + make_interval(secs => 86400), 0)
  on conflict (scope, procedure, key) do nothing
  returning 1;
insert into bench_effects (n) values (:n) returning id, at;
update idempotency_keys set state = 'completed', response = '{"httpStatus":200,"body":"{}"}', http_status = 200,
    lease_owner = null, locked_until = null
  where scope = 'pgbench' and procedure = 'bench.protected' and key = 'k' || :k
    and lease_owner = '00000000-0000-0000-0000-000000000001'::uuid and state = 'processing';
commit;
`;

const BASELINE_SQL = `\\set n random(1, 1000000)
begin;
insert into bench_effects (n) values (:n) returning id, at;
commit;
`;

export interface PgbenchFloor {
  /** Average latency of the claim transaction, ms (median over the runs). */
  claimMs: number;
  /** Average latency of the insert transaction, ms (median over the runs). */
  baselineMs: number;
  /** Median of the per-run ratios. */
  ratio: number;
  runs: number;
  /** Each run's averages, ms. */
  perRun: Array<{ claimMs: number; baselineMs: number }>;
}

export function run({ options, stack }: SectionContext): PgbenchFloor | Skipped {
  log(`pgbench floor (${options.pgbenchSeconds} s × ${options.runs} runs, 1 client)`);
  if (options.pgbenchSeconds === 0) return { skipped: 'BENCH_PGBENCH_SECONDS=0' };
  if (spawnSync('pgbench', ['--version'], { encoding: 'utf8' }).status !== 0)
    return { skipped: 'no pgbench' };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'idem-pgbench-'));
  try {
    const claim = path.join(dir, 'claim.sql');
    const baseline = path.join(dir, 'baseline.sql');
    writeFileSync(claim, CLAIM_SQL);
    writeFileSync(baseline, BASELINE_SQL);
    const perRun: PgbenchFloor['perRun'] = [];
    for (let index = 0; index < options.runs; index += 1) {
      // Both scripts in ONE pgbench run (-f … -f …): transactions of the two kinds interleave at random.
      const result = spawnSync(
        'pgbench',
        [
          '-n',
          '-M',
          'prepared',
          '-c',
          '1',
          '-T',
          String(options.pgbenchSeconds),
          '-f',
          claim,
          '-f',
          baseline,
          stack.databaseUrl,
        ],
        { encoding: 'utf8' },
      );
      if (result.status !== 0)
        return { skipped: `pgbench failed: ${result.stderr.trim().split('\n').pop()}` };
      const averages = [
        ...result.stdout.matchAll(/SQL script \d+:[\s\S]*?latency average = ([\d.]+) ms/g),
      ].map((match) => Number(match[1]));
      const [claimMs, baselineMs] = averages;
      if (claimMs === undefined || baselineMs === undefined)
        return { skipped: 'could not parse pgbench output' };
      perRun.push({ claimMs, baselineMs });
      log(
        `  pgbench run ${index + 1}: claim+insert+complete ${claimMs.toFixed(3)} ms, insert ${baselineMs.toFixed(3)} ms`,
      );
    }
    return {
      claimMs: median(perRun.map((r) => r.claimMs)),
      baselineMs: median(perRun.map((r) => r.baselineMs)),
      ratio: median(perRun.map((r) => r.claimMs / r.baselineMs)),
      runs: options.runs,
      perRun,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function figures(floor: PgbenchFloor | Skipped, options: BenchOptions): Figure[] {
  if ('skipped' in floor) return [];
  return [
    figure({
      id: 'floor',
      label: 'pgbench floor (claim tx / insert tx)',
      runs: floor.perRun.map((r) => r.claimMs / r.baselineMs),
      detail: `claim+insert+complete ${floor.claimMs.toFixed(3)} ms / insert ${floor.baselineMs.toFixed(3)} ms (pgbench, 1 client, ${options.pgbenchSeconds} s × ${floor.runs})`,
    }),
  ];
}
