/**
 * The pgbench floor: Idem's claim, the handler's insert and Idem's completion in one transaction against the
 * insert transaction alone, as SQL with no application in between — what the layer's statements cost Postgres at
 * least. The claim and the completion are the Prisma store's own statements (recorded from the real store, so the
 * floor cannot drift from what it sends), in the round trips its fast path sends them: BEGIN with the claim, the
 * insert, the completion with the COMMIT (pgbench pipelines), against BEGIN, insert, COMMIT one by one as Prisma's
 * interactive transaction sends them. Prepared, as the store's statements are.
 *
 * Two loads: 1 client (latency: the two scripts interleaved at random in one run, `runs` runs) and 32 clients
 * (throughput: each script alone, `runs` pairs of runs, the order alternating) — the SQL alone under the load of
 * the peers' throughput figure, where Postgres is the whole load instead of sharing the cores with the app.
 * `runs` runs of `pgbenchSeconds` each; 0 skips it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { INSERT_EFFECT } from '../peers/effect.ts';
import { type IdemStatements, recordedStatements } from '../profile/recorded-statements.ts';
import { median } from '../stats.ts';
import { type Figure, figure } from '../summary.ts';
import type { SectionContext, Skipped } from './context.ts';

export const name = 'pgbench floor';

/** The clients of the throughput runs: the peers' P2 connections. */
const LOADED_CLIENTS = 32;

export function plannedSeconds(options: BenchOptions): number {
  return options.pgbenchSeconds === 0 ? 0 : (1 + SCRIPTS.length) * options.runs * options.pgbenchSeconds;
}

/** `value` as an SQL literal for a pgbench script (the recorded parameters: text and numbers). */
function literal(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return `'${value.replaceAll("'", "''")}'`;
  throw new Error(`pgbench floor: no literal for a parameter of type ${typeof value}`);
}

/**
 * `sql` with each $n replaced by `params[n - 1]` (already SQL), without its leading label comment (pgbench's
 * prepared mode fails on a statement that opens with one: "could not determine data type of parameter $1").
 */
function bind(sql: string, params: string[]): string {
  return sql.replace(/^\s*\/\*.*?\*\/\s*/, '').replace(/\$(\d+)/g, (_, index: string) => {
    const param = params[Number(index) - 1];
    if (param === undefined) throw new Error(`pgbench floor: the statement has no parameter $${index}`);
    return param;
  });
}

const EFFECT = `${INSERT_EFFECT.replace('$1', ':n')};`;
const KEY = { scope: literal('pgbench'), procedure: literal('bench.protected'), key: `'k' || :k` };

/** A transaction in the fast path's three round trips: BEGIN with `claim`, the effect, `complete` with COMMIT. */
function claimedTransaction(claim: string, complete: string): string {
  return [
    '\\set n random(1, 1000000)',
    '\\set k random(1, 9000000000000000)',
    '\\startpipeline',
    'begin;',
    `${claim.trim()};`,
    '\\endpipeline',
    EFFECT,
    '\\startpipeline',
    `${complete.trim()};`,
    'commit;',
    '\\endpipeline',
    '',
  ].join('\n');
}

/** Idem's transaction as pgbench SQL, every key new (`:k`), each statement ended for pgbench. */
export function idemScript(statements: IdemStatements): string {
  // $1–$3 the key, the rest as the store recorded them.
  const params = (recorded: unknown[]) => [
    KEY.scope,
    KEY.procedure,
    KEY.key,
    ...recorded.slice(3).map(literal),
  ];
  return claimedTransaction(
    bind(statements.claim, params(statements.claimParams('', '', ''))),
    bind(statements.complete, params(statements.completeParams('', '', ''))),
  );
}

/**
 * The least a record in the handler's transaction can cost: a bare `INSERT … ON CONFLICT DO NOTHING` of the key's
 * row (no in-flight cap, no lock timeout, no read of a duplicate's row) and one `UPDATE` of it with the response,
 * in the same round trips as Idem's. The same table, indexes and values as `idemScript`'s.
 */
export function bareScript(statements: IdemStatements): string {
  const [, , , fingerprint, retentionSeconds, owner] = statements.claimParams('', '', '').map(literal);
  const [, , , , response, httpStatus] = statements.completeParams('', '', '').map(literal);
  const where = `scope = ${KEY.scope} and procedure = ${KEY.procedure} and key = ${KEY.key}`;
  return claimedTransaction(
    `insert into "idempotency_keys" (scope, procedure, key, fingerprint, state, lease_owner, created_at, expires_at)
     values (${KEY.scope}, ${KEY.procedure}, ${KEY.key}, ${fingerprint}, 'completed', ${owner}::uuid, now(),
       now() + make_interval(secs => ${retentionSeconds}::double precision))
     on conflict (scope, procedure, key) do nothing`,
    `update "idempotency_keys" set response = ${response}, http_status = ${httpStatus}, lease_owner = null
     where ${where}`,
  );
}

export const BASELINE_SCRIPT = ['\\set n random(1, 1000000)', 'begin;', EFFECT, 'commit;', ''].join('\n');

/** The three transactions the floor times (the scripts above). */
const SCRIPTS = ['claim', 'bare', 'baseline'] as const;
type ScriptName = (typeof SCRIPTS)[number];

export interface PgbenchFloor {
  /** Average latency of the claim transaction, ms (median over the runs), 1 client. */
  claimMs: number;
  /** Average latency of the insert transaction, ms (median over the runs), 1 client. */
  baselineMs: number;
  /** Median of the per-run latency ratios, 1 client. */
  ratio: number;
  runs: number;
  /** Each run's average latencies, ms, 1 client: Idem's transaction, the bare record's, the insert alone. */
  perRun: Array<{ claimMs: number; bareMs: number; baselineMs: number }>;
  /** At LOADED_CLIENTS clients: each run's transactions per second, each script alone. */
  loaded: { clients: number; perRun: Array<Record<`${ScriptName}Tps`, number>> };
}

interface Pgbench {
  scripts: string[];
  clients: number;
  seconds: number;
  databaseUrl: string;
}

/** pgbench's stdout, or the reason it could not run. */
function pgbench({ scripts, clients, seconds, databaseUrl }: Pgbench): { stdout: string } | Skipped {
  const args = ['-n', '-M', 'prepared', '-c', String(clients), '-j', String(Math.min(clients, 2))];
  const result = spawnSync(
    'pgbench',
    [...args, '-T', String(seconds), ...scripts.flatMap((file) => ['-f', file]), databaseUrl],
    { encoding: 'utf8' },
  );
  if (result.status !== 0) return { skipped: `pgbench failed: ${result.stderr.trim().split('\n').pop()}` };
  return { stdout: result.stdout };
}

const tpsOf = (stdout: string) => Number(/tps = ([\d.]+)/.exec(stdout)?.[1] ?? Number.NaN);

export async function run({ options, stack }: SectionContext): Promise<PgbenchFloor | Skipped> {
  log(
    `pgbench floor (${options.pgbenchSeconds} s × ${options.runs} runs, 1 client; ×3 at ${LOADED_CLIENTS})`,
  );
  if (options.pgbenchSeconds === 0) return { skipped: 'BENCH_PGBENCH_SECONDS=0' };
  if (spawnSync('pgbench', ['--version'], { encoding: 'utf8' }).status !== 0)
    return { skipped: 'no pgbench' };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'idem-pgbench-'));
  try {
    const statements = await recordedStatements();
    const contents: Record<ScriptName, string> = {
      claim: idemScript(statements),
      bare: bareScript(statements),
      baseline: BASELINE_SCRIPT,
    };
    const file = (script: ScriptName) => path.join(dir, `${script}.sql`);
    for (const script of SCRIPTS) writeFileSync(file(script), contents[script]);
    const common = { seconds: options.pgbenchSeconds, databaseUrl: stack.databaseUrl };
    const perRun: PgbenchFloor['perRun'] = [];
    const loaded: PgbenchFloor['loaded'] = { clients: LOADED_CLIENTS, perRun: [] };
    for (let index = 0; index < options.runs; index += 1) {
      // The three scripts in ONE run (-f … -f … -f …): transactions of the three kinds interleave at random.
      const together = pgbench({ ...common, scripts: SCRIPTS.map(file), clients: 1 });
      if ('skipped' in together) return together;
      const [claimMs, bareMs, baselineMs] = [
        ...together.stdout.matchAll(/SQL script \d+:[\s\S]*?latency average = ([\d.]+) ms/g),
      ].map((match) => Number(match[1]));
      if (claimMs === undefined || bareMs === undefined || baselineMs === undefined)
        return { skipped: 'could not parse pgbench output' };
      perRun.push({ claimMs, bareMs, baselineMs });
      // Throughput: each script alone at LOADED_CLIENTS, the order rotating from run to run.
      const order = SCRIPTS.map((_, at) => SCRIPTS[(at + index) % SCRIPTS.length] as ScriptName);
      const tps = { claimTps: Number.NaN, bareTps: Number.NaN, baselineTps: Number.NaN };
      for (const script of order) {
        const alone = pgbench({ ...common, scripts: [file(script)], clients: LOADED_CLIENTS });
        if ('skipped' in alone) return alone;
        tps[`${script}Tps`] = tpsOf(alone.stdout);
      }
      loaded.perRun.push(tps);
      log(
        `  pgbench run ${index + 1}: 1 client: Idem ${claimMs.toFixed(3)} ms, bare record ${bareMs.toFixed(3)} ` +
          `ms, insert alone ${baselineMs.toFixed(3)} ms; ${LOADED_CLIENTS} clients: ${tps.claimTps.toFixed(0)} / ` +
          `${tps.bareTps.toFixed(0)} / ${tps.baselineTps.toFixed(0)} tps`,
      );
    }
    return {
      claimMs: median(perRun.map((r) => r.claimMs)),
      baselineMs: median(perRun.map((r) => r.baselineMs)),
      ratio: median(perRun.map((r) => r.claimMs / r.baselineMs)),
      runs: options.runs,
      perRun,
      loaded,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function figures(floor: PgbenchFloor | Skipped, options: BenchOptions): Figure[] {
  if ('skipped' in floor) return [];
  const { clients, perRun } = floor.loaded;
  const tps = (script: ScriptName) => median(perRun.map((r) => r[`${script}Tps`])).toFixed(0);
  const how = `${options.pgbenchSeconds} s × ${perRun.length}`;
  return [
    figure({
      id: 'floor',
      label: 'pgbench floor (claim tx / insert tx)',
      runs: floor.perRun.map((r) => r.claimMs / r.baselineMs),
      detail: `claim+insert+complete ${floor.claimMs.toFixed(3)} ms / insert ${floor.baselineMs.toFixed(3)} ms; the bare record ${median(floor.perRun.map((r) => r.bareMs)).toFixed(3)} ms (pgbench, 1 client, the store's round trips, ${how})`,
    }),
    figure({
      id: 'floor-loaded',
      label: `pgbench floor @${clients} clients, throughput (claim tx / insert tx)`,
      runs: perRun.map((r) => r.claimTps / r.baselineTps),
      detail: `${tps('claim')} / ${tps('baseline')} transactions/s (pgbench, ${clients} clients, each script alone, ${how}, the order rotating): the SQL alone, Postgres the whole load`,
    }),
    figure({
      id: 'floor-bare-loaded',
      label: `pgbench @${clients} clients: the bare record (insert on the key + update) / insert tx`,
      runs: perRun.map((r) => r.bareTps / r.baselineTps),
      detail: `${tps('bare')} / ${tps('baseline')} transactions/s (same runs): the least any record written in the handler's transaction costs; Idem's statements ÷ the bare record's: ${median(perRun.map((r) => r.claimTps / r.bareTps)).toFixed(2)}`,
    }),
  ];
}
