/**
 * `pnpm bench`: what the idempotency middleware costs against the unprotected path (issue #7).
 *
 * Builds nothing: run `pnpm build` first. Creates a scratch database on DATABASE_URL's server (default
 * postgresql://postgres@127.0.0.1:5432), migrates and seeds it, starts ONE `next start` of the production build
 * with IDEM_TEST_SEAMS=1 (the test build of the router, which mounts `bench.*`) plus the payment provider
 * (in-process), and drives `bench.protected` / `bench.unprotected` (apps/web/src/server/routers/bench.ts: the
 * same handler body in one interactive transaction) with autocannon on loopback. Every figure is the median of
 * BENCH_RUNS (≥ 5) runs, protected and unprotected interleaved in each run. Writes docs/bench-results.json and docs/bench-chart.svg.
 *
 * Knobs (environment): BENCH_RUNS (5), BENCH_P1_SECONDS (3), BENCH_P2_SECONDS (5), BENCH_P3_KEYS (200),
 * BENCH_PGBENCH_SECONDS (4; 0 skips the pgbench floor), BENCH_VERBOSE=1 (forward the server's output),
 * BENCH_PEERS=0 (skip the peers section, apps/bench/src/peers/; its own knobs are in peers/config.ts).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createPrismaClient } from '@idem/db';
import { startProvider } from '@idem/provider';
import pg from 'pg';
import { cannon as runCannon, type LoadSample as Sample } from './cannon.ts';
import { peerSettingsFromEnv } from './peers/config.ts';
import { formatPeersReport } from './peers/report.ts';
import { runPeerBench } from './peers/run-peers.ts';
import {
  createDatabase,
  demoUsers,
  dropDatabase,
  messageOf,
  migrateDatabase,
  redact,
  repoRoot,
  scratchDatabaseName,
  seedDatabase,
  useExternalServer,
  withDatabase,
} from './repository.ts';
import { keptStorageResults } from './storage/results-file.ts';

const RUNS = Math.max(5, intEnv('BENCH_RUNS', 5));
const P1_SECONDS = intEnv('BENCH_P1_SECONDS', 3);
const P2_SECONDS = intEnv('BENCH_P2_SECONDS', 5);
const P2_CONNECTIONS = 32;
const P3_KEYS = intEnv('BENCH_P3_KEYS', 200);
const P5_BURST = 50;
const PGBENCH_SECONDS = intEnv('BENCH_PGBENCH_SECONDS', 4);
const VERBOSE = process.env.BENCH_VERBOSE === '1';
const PEERS = process.env.BENCH_PEERS !== '0';

const WEB_DIR = path.join(repoRoot, 'apps/web');
const NEXT_BIN = path.join(WEB_DIR, 'node_modules/next/dist/bin/next');
const TOKEN = demoUsers[0].token;

type Procedure = 'protected' | 'unprotected';

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number.parseInt(raw, 10);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer`);
  return value;
}

function log(line: string): void {
  console.log(`[bench] ${line}`);
}

function median(values: number[]): number {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const middle = Math.floor(sorted.length / 2);
  const high = sorted[middle] ?? Number.NaN;
  return sorted.length % 2 === 1 ? high : ((sorted[middle - 1] ?? high) + high) / 2;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

// ---------------------------------------------------------------------------------------------------------
// The stack: scratch database, provider, one `next start`. Torn down by `cleanup()`, also on Ctrl-C.

const cleanups: Array<() => Promise<void>> = [];
let cleaning: Promise<void> | undefined;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const step of cleanups.reverse()) {
      try {
        await step();
      } catch (error) {
        console.error(`[bench] cleanup: ${messageOf(error)}`);
      }
    }
  })();
  return cleaning;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping and dropping the scratch database`);
    void cleanup().finally(() => process.exit(130));
  });
}

async function startWeb(env: NodeJS.ProcessEnv): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [NEXT_BIN, 'start', '-p', String(port), '-H', '127.0.0.1'], {
    cwd: WEB_DIR,
    env: { ...process.env, ...env, NODE_ENV: 'production', NEXT_TELEMETRY_DISABLED: '1', PORT: String(port) },
    stdio: ['ignore', VERBOSE ? 'inherit' : 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  });
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error('next start exited before it answered /api/health');
    try {
      const response = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return { url, child };
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url}/api/health did not answer within 60 s`);
}

// ---------------------------------------------------------------------------------------------------------
// Requests.

function requestHeaders(key: string): Record<string, string> {
  return { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, 'idempotency-key': key };
}

const body = (n: number) => JSON.stringify({ json: { n } });

/** One autocannon run against `bench.<procedure>` (apps/bench/src/cannon.ts). */
function cannon(
  url: string,
  procedure: Procedure,
  options: { connections: number; duration?: number; amount?: number; nextKey?: () => string; n?: number },
): Promise<Sample> {
  const { n, ...rest } = options;
  return runCannon(url, {
    ...rest,
    path: `/api/trpc/bench.${procedure}`,
    body: body(n ?? 1),
    headers: requestHeaders,
  });
}

async function countEffects(client: pg.Client, n?: number): Promise<number> {
  const { rows } = await client.query<{ c: number }>(
    n === undefined
      ? 'select count(*)::int as c from bench_effects'
      : 'select count(*)::int as c from bench_effects where n = $1',
    n === undefined ? [] : [n],
  );
  return rows[0]?.c ?? 0;
}

// ---------------------------------------------------------------------------------------------------------
// The measurements of one run.

interface RunResult {
  p1: Record<Procedure, number>;
  p2: Record<Procedure, number>;
  p3: { firstP50: number; replayP50: number; replayEffects: number };
  p5: { executions: number; wallMs: number; controlWallMs: number; statuses: Record<string, number> };
  failures: number;
}

async function oneRun(url: string, client: pg.Client, run: number): Promise<RunResult> {
  // ABAB…: alternate which procedure goes first, so neither always runs on the warmer (or noisier) machine.
  const order: Procedure[] = run % 2 === 0 ? ['protected', 'unprotected'] : ['unprotected', 'protected'];
  let failures = 0;

  const p1 = { protected: Number.NaN, unprotected: Number.NaN };
  for (const procedure of order) {
    const sample = await cannon(url, procedure, { connections: 1, duration: P1_SECONDS });
    failures += sample.failed;
    p1[procedure] = median(sample.latencies);
    log(`  run ${run + 1} P1 ${procedure.padEnd(11)} p50 ${p1[procedure].toFixed(2)} ms (${sample.ok} ok)`);
  }

  const p2 = { protected: Number.NaN, unprotected: Number.NaN };
  for (const procedure of order) {
    const sample = await cannon(url, procedure, { connections: P2_CONNECTIONS, duration: P2_SECONDS });
    failures += sample.failed;
    p2[procedure] = sample.ok / sample.seconds;
    log(
      `  run ${run + 1} P2 ${procedure.padEnd(11)} ${p2[procedure].toFixed(0)} req/s (${sample.failed} failed)`,
    );
  }

  // P3: prime P3_KEYS keys (first executions), then send each again (replays), one connection.
  const keys = Array.from({ length: P3_KEYS }, () => randomUUID());
  let primeIndex = 0;
  const prime = await cannon(url, 'protected', {
    connections: 1,
    amount: P3_KEYS,
    nextKey: () => keys[primeIndex++ % keys.length] ?? randomUUID(),
  });
  const before = await countEffects(client);
  let replayIndex = 0;
  const replay = await cannon(url, 'protected', {
    connections: 1,
    amount: P3_KEYS,
    nextKey: () => keys[replayIndex++ % keys.length] ?? randomUUID(),
  });
  const replayEffects = (await countEffects(client)) - before;
  failures += prime.failed + replay.failed;
  const p3 = { firstP50: median(prime.latencies), replayP50: median(replay.latencies), replayEffects };
  log(
    `  run ${run + 1} P3 first p50 ${p3.firstP50.toFixed(2)} ms, replay p50 ${p3.replayP50.toFixed(2)} ms, ` +
      `rows written by the replays: ${replayEffects}`,
  );

  // P5: 50 requests with ONE key at once; `n` marks this burst's rows.
  const marker = 1_000_000 + run;
  const key = randomUUID();
  const statuses: Record<string, number> = {};
  const started = performance.now();
  await Promise.all(
    Array.from({ length: P5_BURST }, async () => {
      const response = await fetch(`${url}/api/trpc/bench.protected`, {
        method: 'POST',
        headers: requestHeaders(key),
        body: body(marker),
      }).catch(() => undefined);
      const status = response ? String(response.status) : 'error';
      await response?.arrayBuffer();
      statuses[status] = (statuses[status] ?? 0) + 1;
    }),
  );
  const wallMs = performance.now() - started;
  const executions = await countEffects(client, marker);
  // Control: the same burst of 50 at once, unprotected, distinct keys: what serving 50 requests costs at all.
  const controlStarted = performance.now();
  await Promise.all(
    Array.from({ length: P5_BURST }, async () => {
      const response = await fetch(`${url}/api/trpc/bench.unprotected`, {
        method: 'POST',
        headers: requestHeaders(randomUUID()),
        body: body(2),
      }).catch(() => undefined);
      await response?.arrayBuffer();
    }),
  );
  const controlWallMs = performance.now() - controlStarted;
  log(
    `  run ${run + 1} P5 ${P5_BURST} same-key requests: ${executions} execution(s), wall ${wallMs.toFixed(1)} ms, ` +
      `statuses ${JSON.stringify(statuses)}; unprotected 50-burst (distinct keys) ${controlWallMs.toFixed(1)} ms`,
  );
  return { p1, p2, p3, p5: { executions, wallMs, controlWallMs, statuses }, failures };
}

// ---------------------------------------------------------------------------------------------------------
// pgbench floor: the claim + completion statements in one transaction vs the baseline insert transaction.

const CLAIM_SQL = `\\set n random(1, 1000000)
\\set k random(1, 9000000000000000)
begin;
insert into idempotency_keys as k
    (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at, replay_count)
  values ('pgbench', 'bench.protected', 'k' || :k, repeat('a', 64), 'processing',
    '00000000-0000-0000-0000-000000000001'::uuid, now() + make_interval(secs => 30), now(),
    now() + make_interval(secs => 86400), 0)
  on conflict (scope, procedure, key) do update set state = 'processing' where k.expires_at <= now()
  returning (xmax = 0) as inserted;
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

interface PgbenchFloor {
  claimMs: number;
  baselineMs: number;
  ratio: number;
  runs: number;
}

function pgbenchFloor(databaseUrl: string): PgbenchFloor | { skipped: string } {
  if (PGBENCH_SECONDS === 0) return { skipped: 'BENCH_PGBENCH_SECONDS=0' };
  if (spawnSync('pgbench', ['--version'], { encoding: 'utf8' }).status !== 0)
    return { skipped: 'no pgbench' };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'idem-pgbench-'));
  try {
    const claim = path.join(dir, 'claim.sql');
    const baseline = path.join(dir, 'baseline.sql');
    writeFileSync(claim, CLAIM_SQL);
    writeFileSync(baseline, BASELINE_SQL);
    const ratios: number[] = [];
    const claims: number[] = [];
    const baselines: number[] = [];
    for (let run = 0; run < RUNS; run += 1) {
      // Both scripts in ONE pgbench run (-f … -f …): transactions of the two kinds interleave at random.
      const result = spawnSync(
        'pgbench',
        ['-n', '-c', '1', '-T', String(PGBENCH_SECONDS), '-f', claim, '-f', baseline, databaseUrl],
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
      claims.push(claimMs);
      baselines.push(baselineMs);
      ratios.push(claimMs / baselineMs);
      log(
        `  pgbench run ${run + 1}: claim+insert+complete ${claimMs.toFixed(3)} ms, insert ${baselineMs.toFixed(3)} ms`,
      );
    }
    return { claimMs: median(claims), baselineMs: median(baselines), ratio: median(ratios), runs: RUNS };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Report: table, JSON, SVG.

interface Figure {
  id: string;
  label: string;
  value: number;
  target: string;
  met: boolean;
  /** For the chart: the target's bound and whether the value must stay below it. */
  bound: number;
  upper: boolean;
  detail: string;
}

function svgChart(figures: Figure[], title: string): string {
  const width = 760;
  const rowHeight = 44;
  const left = 250;
  const barWidth = 420;
  const top = 48;
  const height = top + figures.length * rowHeight + 40;
  const xml = (text: string) => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  const rows = figures.map((figure, index) => {
    const y = top + index * rowHeight;
    const scale = Math.max(figure.value, figure.bound, 0.001) * 1.25;
    const w = Math.max(1, (figure.value / scale) * barWidth);
    const tx = left + (figure.bound / scale) * barWidth;
    const color = figure.met ? '#2e7d32' : '#c62828';
    return [
      `<text x="${left - 10}" y="${y + 20}" text-anchor="end">${xml(figure.label)}</text>`,
      `<rect x="${left}" y="${y + 6}" width="${w.toFixed(1)}" height="20" fill="${color}"/>`,
      `<line x1="${tx.toFixed(1)}" y1="${y + 1}" x2="${tx.toFixed(1)}" y2="${y + 31}" stroke="#111" stroke-width="2" stroke-dasharray="4 2"/>`,
      `<text x="${(left + w + 6).toFixed(1)}" y="${y + 20}">${xml(`${formatValue(figure.value)} (target ${figure.target})`)}</text>`,
    ].join('\n  ');
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="13">
  <title>${xml(title)}</title>
  <rect width="100%" height="100%" fill="#fff"/>
  <text x="16" y="26" font-size="16" font-weight="bold">${xml(title)}</text>
  ${rows.join('\n  ')}
  <text x="16" y="${height - 14}" fill="#555">Bars: measured (green = target met, red = not met). Dashed line: the target.</text>
</svg>
`;
}

function formatValue(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(3);
}

// ---------------------------------------------------------------------------------------------------------

async function main() {
  if (!existsSync(path.join(WEB_DIR, '.next/BUILD_ID'))) {
    throw new Error('No production build of apps/web: run `pnpm build` first.');
  }
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const adminUrl = server.adminUrl;
  const name = scratchDatabaseName('idem_bench');
  const databaseUrl = await createDatabase(adminUrl, name);
  cleanups.push(() => dropDatabase(adminUrl, name));
  log(`scratch database ${name} on ${redact(withDatabase(adminUrl, ''))}`);

  await migrateDatabase(databaseUrl);
  const db = createPrismaClient({ connectionString: databaseUrl, max: 1 });
  await seedDatabase(db).finally(() => db.$disconnect());
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  cleanups.push(() => client.end());
  await client.query(
    'create table if not exists bench_effects (id bigserial primary key, n int, at timestamptz default now())',
  );
  const pgVersion =
    (await client.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v ?? '?';
  log('migrated and seeded; bench_effects created');

  // A production build refuses the provider's public demo secrets: both sides get generated ones.
  const providerSecretKey = `sk_bench_${randomBytes(32).toString('base64url')}`;
  const webhookSecret = `whsec_bench_${randomBytes(32).toString('base64url')}`;
  const provider = await startProvider({
    databaseUrl,
    port: 0,
    secretKey: providerSecretKey,
    webhookSecret,
    log: () => {},
  });
  cleanups.push(() => provider.close());
  const { url } = await startWeb({
    DATABASE_URL: databaseUrl,
    PROVIDER_URL: provider.url,
    PROVIDER_SECRET_KEY: providerSecretKey,
    PROVIDER_WEBHOOK_SECRET: webhookSecret,
    SESSION_SECRET: randomBytes(32).toString('base64url'),
    // The test build of the router (apps/web/src/server/test-seams.ts) mounts `bench.*`; no control is armed.
    IDEM_TEST_SEAMS: '1',
  });
  log(`next start (production) at ${url}, provider at ${provider.url}`);

  // Sanity: both procedures answer 200 with the same shape; a replay says so.
  for (const procedure of ['protected', 'unprotected'] as const) {
    const response = await fetch(`${url}/api/trpc/bench.${procedure}`, {
      method: 'POST',
      headers: requestHeaders(randomUUID()),
      body: body(1),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`bench.${procedure}: HTTP ${response.status} ${text.slice(0, 300)}`);
  }

  log('warm-up (JIT, connection pools): 2 s per procedure at 8 connections');
  for (const procedure of ['protected', 'unprotected'] as const) {
    await cannon(url, procedure, { connections: 8, duration: 2 });
  }

  const results: RunResult[] = [];
  for (let run = 0; run < RUNS; run += 1) {
    log(`run ${run + 1}/${RUNS}`);
    results.push(await oneRun(url, client, run));
  }

  log(`pgbench floor (${PGBENCH_SECONDS} s × ${RUNS} runs, 1 client)`);
  const floor = pgbenchFloor(databaseUrl);

  // Peers on the same handler (apps/bench/src/peers/): own server processes on this scratch database.
  const peers = PEERS
    ? await runPeerBench({
        databaseUrl,
        settings: peerSettingsFromEnv(),
        log: (line) => log(`peers: ${line}`),
        verbose: VERBOSE,
      }).catch((error: unknown) => ({ skipped: messageOf(error) }))
    : { skipped: 'BENCH_PEERS=0' };

  const p1Ratio = median(results.map((r) => r.p1.protected / r.p1.unprotected));
  const p2Ratio = median(results.map((r) => r.p2.protected / r.p2.unprotected));
  const p3Ratio = median(results.map((r) => r.p3.replayP50 / r.p3.firstP50));
  const p5Executions = Math.max(...results.map((r) => r.p5.executions));
  const p5Ratio = median(results.map((r) => r.p5.wallMs / r.p1.protected));
  const failures = results.reduce((sum, r) => sum + r.failures, 0);

  const figures: Figure[] = [
    {
      id: 'P1',
      label: 'P1 first-execution p50 ratio',
      value: p1Ratio,
      target: '≤ 1.10',
      met: p1Ratio <= 1.1,
      bound: 1.1,
      upper: true,
      detail: `protected ${median(results.map((r) => r.p1.protected)).toFixed(2)} ms / unprotected ${median(results.map((r) => r.p1.unprotected)).toFixed(2)} ms (1 connection, ${P1_SECONDS} s each)`,
    },
    {
      id: 'P2',
      label: 'P2 throughput ratio',
      value: p2Ratio,
      target: '≥ 0.90',
      met: p2Ratio >= 0.9,
      bound: 0.9,
      upper: false,
      detail: `protected ${median(results.map((r) => r.p2.protected)).toFixed(0)} req/s / unprotected ${median(results.map((r) => r.p2.unprotected)).toFixed(0)} req/s (${P2_CONNECTIONS} connections, ${P2_SECONDS} s each)`,
    },
    {
      id: 'P3',
      label: 'P3 replay p50 / first p50',
      value: p3Ratio,
      target: '≤ 0.5',
      met: p3Ratio <= 0.5,
      bound: 0.5,
      upper: true,
      detail: `replay ${median(results.map((r) => r.p3.replayP50)).toFixed(2)} ms / first ${median(results.map((r) => r.p3.firstP50)).toFixed(2)} ms (${P3_KEYS} keys, 1 connection); rows written by replays: ${results.reduce((sum, r) => sum + r.p3.replayEffects, 0)}`,
    },
    {
      id: 'P5-executions',
      label: `P5 executions (${P5_BURST} same-key)`,
      value: p5Executions,
      target: '= 1',
      met: results.every((r) => r.p5.executions === 1),
      bound: 1,
      upper: true,
      detail: `per run: ${results.map((r) => r.p5.executions).join(', ')}`,
    },
    {
      id: 'P5-wall',
      label: 'P5 wall / one execution',
      value: p5Ratio,
      target: '≤ 3',
      met: p5Ratio <= 3,
      bound: 3,
      upper: true,
      detail: `wall ${median(results.map((r) => r.p5.wallMs)).toFixed(1)} ms / P1 protected p50 of the same run; control: 50 unprotected requests at once (distinct keys) ${median(results.map((r) => r.p5.controlWallMs)).toFixed(1)} ms, same-key wall / control ${median(results.map((r) => r.p5.wallMs / r.p5.controlWallMs)).toFixed(2)}; statuses: ${results.map((r) => JSON.stringify(r.p5.statuses)).join(' ')}`,
    },
  ];
  if ('ratio' in floor) {
    figures.push({
      id: 'floor',
      label: 'pgbench floor (claim tx / insert tx)',
      value: floor.ratio,
      target: 'info',
      met: true,
      bound: 1,
      upper: true,
      detail: `claim+insert+complete ${floor.claimMs.toFixed(3)} ms / insert ${floor.baselineMs.toFixed(3)} ms (pgbench, 1 client, ${PGBENCH_SECONDS} s × ${floor.runs})`,
    });
  }

  console.log('');
  console.log('| figure | median ratio | target | met | detail |');
  console.log('|---|---|---|---|---|');
  for (const figure of figures) {
    console.log(
      `| ${figure.id} | ${formatValue(figure.value)} | ${figure.target} | ${figure.target === 'info' ? '–' : figure.met ? 'yes' : '**no**'} | ${figure.detail} |`,
    );
  }
  if (!('ratio' in floor)) console.log(`pgbench floor skipped: ${floor.skipped}`);
  if (failures > 0) console.log(`WARNING: ${failures} non-2xx responses or connection errors during P1–P3`);
  console.log(`\nPeers on the same handler:\n\n${formatPeersReport(peers)}`);

  const machine = {
    cpus: os.cpus().length,
    node: process.version,
    postgres: pgVersion,
    platform: `${os.platform()} ${os.release()}`,
  };
  const json = {
    date: new Date().toISOString(),
    command: 'pnpm build && pnpm bench',
    machine,
    settings: {
      runs: RUNS,
      p1Seconds: P1_SECONDS,
      p2Seconds: P2_SECONDS,
      p2Connections: P2_CONNECTIONS,
      p3Keys: P3_KEYS,
      p5Burst: P5_BURST,
      pgbenchSeconds: PGBENCH_SECONDS,
    },
    figures: figures.map(({ bound: _bound, upper: _upper, ...figure }) => figure),
    pgbenchFloor: floor,
    failures,
    runs: results,
    peers,
    storage: keptStorageResults(), // written by `pnpm bench:storage` (apps/bench/src/storage/)
  };
  writeFileSync(path.join(repoRoot, 'docs/bench-results.json'), `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(
    path.join(repoRoot, 'docs/bench-chart.svg'),
    svgChart(
      figures,
      `Idempotency middleware: protected / unprotected (median of ${RUNS} runs, ${machine.cpus} cores, Node ${machine.node})`,
    ),
  );
  log('wrote docs/bench-results.json and docs/bench-chart.svg');
}

main()
  .catch((error) => {
    console.error(`[bench] ${messageOf(error)}`);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
