/**
 * `pnpm bench`: every figure of issue 14's table in one run — what the idempotency middleware costs against the
 * unprotected path (P1, P2, P3, P5, P2 against connections, the checkout's placeOrder), the peers on the same
 * handler (the peers ratio, P4), the client bundle (P7) and the storage section (P6, growth).
 *
 * Builds nothing: run `pnpm build` first. Starts the stack (stack.ts: a scratch database, the provider, the
 * app's test server) and drives `bench.protected` / `bench.unprotected` (requests.ts) with autocannon on loopback.
 * Every figure is the median of BENCH_RUNS (≥ 5) runs, protected and unprotected interleaved in each run. Writes
 * docs/bench-results.json, docs/bench-chart.svg and the generated summary block of docs/BENCHMARKS.md; prints the
 * time left as it goes.
 *
 * Knobs (environment variables, BENCH_QUICK=1 for the shortest run): options.ts.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createPrismaClient } from '@idem/db';
import { fulfilOrder } from '@idem/worker';
import type pg from 'pg';
import { installFaultTriggers } from '../../worker/test/fault-triggers.ts';
import { cannon as runCannon } from './cannon.ts';
import { svgChart } from './chart.ts';
import { log } from './log.ts';
import { parseBenchOptions } from './options.ts';
import { type ArmId, arms } from './peers/contenders.ts';
import { formatPeersReport } from './peers/report.ts';
import type { PeersResult } from './peers/results.ts';
import { runPeerBench } from './peers/run-peers.ts';
import { createProgress, type Progress } from './progress.ts';
import { benchRoot, messageOf, repoRoot } from './repository.ts';
import { burst, cannon, countEffects, type Measured, notOk, requestHeaders } from './requests.ts';
import { startStack, stopOnSignals } from './stack.ts';
import { median } from './stats.ts';
import { runStorageBench } from './storage/index.ts';
import type { StorageBenchResult } from './storage/report.ts';
import { keptStorageResults } from './storage/results-file.ts';
import { BEFORE, type Figure, figure, summaryMarkdown, writeSummaryIntoBenchmarks } from './summary.ts';
import { Teardown } from './teardown.ts';

const OPTIONS = parseBenchOptions();
const QUICK = OPTIONS.quick;
const RUNS = OPTIONS.runs;
const P1_SECONDS = OPTIONS.p1Seconds;
const P2_SECONDS = OPTIONS.p2Seconds;
const P2_CONNECTIONS = OPTIONS.p2Connections;
const P3_KEYS = OPTIONS.p3Keys;
const P5_BURST = OPTIONS.p5Burst;
const PGBENCH_SECONDS = OPTIONS.pgbenchSeconds;
const CURVE_CONNECTIONS = OPTIONS.curveConnections;
const CURVE_ROUNDS = OPTIONS.curveRounds;
const CURVE_SECONDS = OPTIONS.curveSeconds;
const ORDER_SECONDS = OPTIONS.orderSeconds;
const JOBS = OPTIONS.jobs;
const VERBOSE = OPTIONS.verbose;

// ---------------------------------------------------------------------------------------------------------
// The measurements of one run.

interface RunResult {
  p1: Record<Measured, number>;
  p2: Record<Measured, number>;
  /** `noopP50`: the route with no database work of its own, the same 1 connection: what any answer costs at least. */
  p3: { firstP50: number; replayP50: number; replayEffects: number; noopP50: number };
  /**
   * `replayWallMs`: the same burst on a key that has finished (50 replays at once); `noopWallMs`: 50 requests
   * to the route with no database work of its own. Both bound what the 49 duplicates of `wallMs` could cost at best.
   */
  p5: {
    executions: number;
    wallMs: number;
    controlWallMs: number;
    replayWallMs: number;
    noopWallMs: number;
    statuses: Record<string, number>;
  };
  failures: number;
}

async function oneRun(url: string, client: pg.Client, run: number): Promise<RunResult> {
  // ABAB…: alternate which procedure goes first, so neither always runs on the warmer (or noisier) machine.
  const order: Measured[] = run % 2 === 0 ? ['protected', 'unprotected'] : ['unprotected', 'protected'];
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
  const noop = await cannon(url, 'noop', { connections: 1, amount: P3_KEYS });
  failures += prime.failed + replay.failed + noop.failed;
  const p3 = {
    firstP50: median(prime.latencies),
    replayP50: median(replay.latencies),
    replayEffects,
    noopP50: median(noop.latencies),
  };
  log(
    `  run ${run + 1} P3 first p50 ${p3.firstP50.toFixed(2)} ms, replay p50 ${p3.replayP50.toFixed(2)} ms, ` +
      `rows written by the replays: ${replayEffects}; the route with no database work of its own p50 ${p3.noopP50.toFixed(2)} ms`,
  );

  // P5: 50 requests with ONE key at once; `n` marks this burst's rows. First a burst that is not timed: the
  // client's keep-alive sockets have closed during P3, and the first burst would otherwise open 50 new ones
  // while the bursts compared with it found them open.
  await burst(url, 'noop', { size: P5_BURST, keyOf: randomUUID, n: 2 });
  const marker = 1_000_000 + run;
  const key = randomUUID();
  const statuses: Record<string, number> = {};
  const wallMs = await burst(url, 'protected', { size: P5_BURST, keyOf: () => key, n: marker, statuses });
  const executions = await countEffects(client, marker);
  // Control: the same burst of 50 at once, unprotected, distinct keys: what serving 50 requests costs at all.
  // Floors: the same-key burst again, now that its key has finished (50 replays), and 50 requests to the route
  // with no database work of its own. The 49 duplicates above cannot cost less than replays, nor replays less
  // than the bare route. Every burst's non-2xx answers count as failures: a failing floor would look cheap.
  const floorStatuses: Record<string, number> = {};
  const controlWallMs = await burst(url, 'unprotected', {
    size: P5_BURST,
    keyOf: randomUUID,
    n: 2,
    statuses: floorStatuses,
  });
  const replayWallMs = await burst(url, 'protected', {
    size: P5_BURST,
    keyOf: () => key,
    n: marker,
    statuses: floorStatuses,
  });
  const noopWallMs = await burst(url, 'noop', {
    size: P5_BURST,
    keyOf: randomUUID,
    n: 2,
    statuses: floorStatuses,
  });
  failures += notOk(statuses) + notOk(floorStatuses);
  log(
    `  run ${run + 1} P5 ${P5_BURST} same-key requests: ${executions} execution(s), wall ${wallMs.toFixed(1)} ms, ` +
      `statuses ${JSON.stringify(statuses)}; unprotected 50-burst (distinct keys) ${controlWallMs.toFixed(1)} ms; ` +
      `50 replays ${replayWallMs.toFixed(1)} ms; 50 with no database work ${noopWallMs.toFixed(1)} ms`,
  );
  return {
    p1,
    p2,
    p3,
    p5: { executions, wallMs, controlWallMs, replayWallMs, noopWallMs, statuses },
    failures,
  };
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
      // Prepared statements (-M prepared), as the store's are (idempotencyStatementName): the SQL floor.
      const result = spawnSync(
        'pgbench',
        [
          '-n',
          '-M',
          'prepared',
          '-c',
          '1',
          '-T',
          String(PGBENCH_SECONDS),
          '-f',
          claim,
          '-f',
          baseline,
          databaseUrl,
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
// P2 against connections, the realistic path (checkout), the client bundle (P7).

interface CurveLevel {
  connections: number;
  protectedRps: number;
  unprotectedRps: number;
  /** Median of the per-round ratios. */
  ratio: number;
  rounds: Array<Record<Measured, number>>;
}

async function throughputCurve(url: string, progress: Progress): Promise<CurveLevel[]> {
  const levels: CurveLevel[] = [];
  for (const [index, connections] of CURVE_CONNECTIONS.entries()) {
    progress.run(index + 1, CURVE_CONNECTIONS.length);
    const rounds: Array<Record<Measured, number>> = [];
    for (let round = 0; round < CURVE_ROUNDS; round += 1) {
      const order: Measured[] = round % 2 === 0 ? ['protected', 'unprotected'] : ['unprotected', 'protected'];
      const rps = { protected: Number.NaN, unprotected: Number.NaN };
      for (const procedure of order) {
        const sample = await cannon(url, procedure, { connections, duration: CURVE_SECONDS });
        rps[procedure] = sample.ok / sample.seconds;
      }
      rounds.push(rps);
    }
    const level = {
      connections,
      protectedRps: median(rounds.map((r) => r.protected)),
      unprotectedRps: median(rounds.map((r) => r.unprotected)),
      ratio: median(rounds.map((r) => r.protected / r.unprotected)),
      rounds,
    };
    log(
      `  @${connections}: protected ${level.protectedRps.toFixed(0)} req/s, unprotected ${level.unprotectedRps.toFixed(0)} req/s, ratio ${level.ratio.toFixed(2)}`,
    );
    levels.push(level);
  }
  return levels;
}

interface CheckoutPath {
  protectedP50: number;
  unprotectedP50: number;
  ratio: number;
  addedMs: number;
  runs: Array<{ protectedP50: number; unprotectedP50: number; failed: number }>;
}

/**
 * `checkout.placeOrder` (external mode: claim, price + reserve stock, charge the provider over loopback HTTP,
 * record the payment, complete) against the same service without the layer (`bench.placeOrderUnprotected`).
 * Stock is topped up first so that no order is refused.
 */
async function checkoutPath(url: string, client: pg.Client, progress: Progress): Promise<CheckoutPath> {
  await client.query('update products set stock = 1000000000');
  const orderBody = JSON.stringify({
    json: { items: [{ sku: 'MUG-STONE', quantity: 1 }], email: 'alice@example.com', cardToken: 'tok_visa' },
  });
  const paths = {
    protected: '/api/trpc/checkout.placeOrder',
    unprotected: '/api/trpc/bench.placeOrderUnprotected',
  };
  const time = (procedure: Measured, duration: number) =>
    runCannon(url, {
      connections: 1,
      duration,
      path: paths[procedure],
      body: orderBody,
      headers: requestHeaders,
    });
  for (const procedure of ['protected', 'unprotected'] as const) await time(procedure, 1);
  const runs: CheckoutPath['runs'] = [];
  for (let run = 0; run < RUNS; run += 1) {
    progress.run(run + 1, RUNS);
    const order: Measured[] = run % 2 === 0 ? ['protected', 'unprotected'] : ['unprotected', 'protected'];
    const p50 = { protected: Number.NaN, unprotected: Number.NaN };
    let failed = 0;
    for (const procedure of order) {
      const sample = await time(procedure, ORDER_SECONDS);
      failed += sample.failed;
      p50[procedure] = median(sample.latencies);
    }
    runs.push({ protectedP50: p50.protected, unprotectedP50: p50.unprotected, failed });
    log(
      `  placeOrder p50: with the layer ${p50.protected.toFixed(2)} ms, without ${p50.unprotected.toFixed(2)} ms (${failed} failed)`,
    );
  }
  return {
    protectedP50: median(runs.map((r) => r.protectedP50)),
    unprotectedP50: median(runs.map((r) => r.unprotectedP50)),
    ratio: median(runs.map((r) => r.protectedP50 / r.unprotectedP50)),
    addedMs: median(runs.map((r) => r.protectedP50 - r.unprotectedP50)),
    runs,
  };
}

interface JobDedupe {
  jobs: number;
  /** First delivery of a fulfilment job, the receipt deduplicated by the unique (order_id, 'receipt'). */
  firstP50: number;
  /** The same first delivery with the dedupe off (the test hook's per-delivery receipt kind): the baseline. */
  withoutDedupeP50: number;
  /** A redelivery of an already fulfilled job: what the dedupe costs when it fires (it absorbs the job). */
  duplicateP50: number;
  addedMs: number;
}

/**
 * The worker's job dedupe, per job: `fulfilOrder` on paid orders (the checkout section's), interleaved — a first
 * delivery as the worker runs it, a first delivery of another order with the dedupe switched off (the crash
 * tests' control: the database writes the receipt under a kind of its own, fault-triggers.ts), and a second
 * delivery of the first order (a duplicate the unique keys absorb). Every arm's sessions pass through the same
 * trigger function (the two deduplicated arms' with nothing to do), so the trigger's cost is in all three.
 */
async function jobDedupe(
  databaseUrl: string,
  client: pg.Client,
  progress: Progress,
): Promise<JobDedupe | { skipped: string }> {
  const { rows } = await client.query<{ id: string }>(
    "select id::text as id from orders where status = 'paid' order by created_at limit $1",
    [2 * JOBS],
  );
  const pairs = Math.floor(rows.length / 2);
  if (pairs < 10) return { skipped: `only ${rows.length} paid orders to fulfil` };
  const admin = createPrismaClient({ connectionString: databaseUrl, max: 1 });
  const faults = await installFaultTriggers(admin);
  const deduped = await faults.session(databaseUrl, {});
  const withoutDedupe = await faults.session(databaseUrl, { receiptKindPerDelivery: true });
  const db = createPrismaClient({ connectionString: deduped.url, max: 2 });
  const control = createPrismaClient({ connectionString: withoutDedupe.url, max: 2 });
  const silent = { info: () => {}, error: () => {} };
  const first: number[] = [];
  const withoutDedupeMs: number[] = [];
  const duplicate: number[] = [];
  const timed = async (into: number[], job: () => Promise<unknown>) => {
    const started = performance.now();
    await job();
    into.push(performance.now() - started);
  };
  try {
    for (let i = 0; i < pairs; i += 1) {
      if (i % Math.max(1, Math.floor(pairs / 5)) === 0)
        progress.run(Math.min(5, 1 + Math.floor((5 * i) / pairs)), 5);
      const dedupedOrder = rows[2 * i]?.id ?? '';
      const controlOrder = rows[2 * i + 1]?.id ?? '';
      const arms = [
        () => timed(first, () => fulfilOrder(db, dedupedOrder, { log: silent })),
        () => timed(withoutDedupeMs, () => fulfilOrder(control, controlOrder, { log: silent })),
      ];
      for (const arm of i % 2 === 0 ? arms : arms.reverse()) await arm();
      await timed(duplicate, () => fulfilOrder(db, dedupedOrder, { log: silent }));
    }
  } finally {
    await db.$disconnect();
    await control.$disconnect();
    await faults.drop();
    await admin.$disconnect();
  }
  const result = {
    jobs: pairs,
    firstP50: median(first),
    withoutDedupeP50: median(withoutDedupeMs),
    duplicateP50: median(duplicate),
    addedMs: median(first) - median(withoutDedupeMs),
  };
  log(
    `  fulfilment p50: first delivery ${result.firstP50.toFixed(2)} ms, without dedupe ${result.withoutDedupeP50.toFixed(2)} ms, duplicate delivery ${result.duplicateP50.toFixed(2)} ms (${pairs} jobs each)`,
  );
  return result;
}

interface ClientSize {
  entry: string;
  minified: number;
  gzipped: number;
}

/** `pnpm bench:client-size --json`, as its own process (it is the P7 script; its first entry is the checkout's). */
function clientSize(): ClientSize[] | { skipped: string } {
  const result = spawnSync(
    process.execPath,
    ['--import', 'tsx', path.join(benchRoot, 'src/client-size.ts'), '--json'],
    {
      cwd: benchRoot,
      encoding: 'utf8',
    },
  );
  if (result.status !== 0)
    return { skipped: `client-size failed: ${result.stderr.trim().split('\n').pop()}` };
  try {
    return JSON.parse(result.stdout) as ClientSize[];
  } catch {
    return { skipped: 'client-size printed no JSON' };
  }
}

// ---------------------------------------------------------------------------------------------------------

async function main(teardown: Teardown) {
  const loadAtStart = os.loadavg()[0] ?? Number.NaN;
  const stack = await startStack(OPTIONS, teardown);
  const { url, client, databaseUrl, adminUrl } = stack;
  const pgVersion = stack.postgresVersion;

  const peerSettings = OPTIONS.peers;
  const storageSettings = OPTIONS.storage;
  // Estimated seconds per section on a quiet 2-core machine (timed load + fixed costs), for the time left.
  const peersSeconds = peerSettings
    ? 15 +
      peerSettings.runs *
        (7 * (peerSettings.p1Seconds + peerSettings.p2Seconds) + (4 * peerSettings.replayKeys * 5) / 1000 + 6)
    : 0;
  const storageSeconds = storageSettings
    ? (storageSettings.sections.has('p6')
        ? (storageSettings.p6Rows + storageSettings.p6LiveRows) / 25_000 + 15
        : 0) +
      (storageSettings.sections.has('growth')
        ? (storageSettings.growthRows.at(-1) ?? 0) / 40_000 + storageSettings.growthRows.length * 20
        : 0)
    : 0;
  const progress = createProgress(
    [
      {
        name: 'main (P1 P2 P3 P5)',
        seconds: 4 + RUNS * (2 * P1_SECONDS + 2 * P2_SECONDS + (P3_KEYS * 2 * 6) / 1000 + 1),
      },
      {
        name: 'P2 against connections',
        seconds: CURVE_CONNECTIONS.length * CURVE_ROUNDS * 2 * CURVE_SECONDS,
      },
      { name: 'checkout placeOrder', seconds: 2 + RUNS * 2 * ORDER_SECONDS },
      { name: 'worker job dedupe', seconds: (JOBS * 3 * 8) / 1000 },
      { name: 'pgbench floor', seconds: PGBENCH_SECONDS === 0 ? 0 : RUNS * PGBENCH_SECONDS },
      { name: 'peers', seconds: peersSeconds },
      { name: 'client size (P7)', seconds: 3 },
      { name: 'storage (P6, growth)', seconds: storageSeconds },
    ],
    log,
  );

  progress.section('main (P1 P2 P3 P5)');
  log('warm-up (JIT, connection pools): 2 s per procedure at 8 connections');
  for (const procedure of ['protected', 'unprotected'] as const) {
    await cannon(url, procedure, { connections: 8, duration: 2 });
  }

  const results: RunResult[] = [];
  for (let run = 0; run < RUNS; run += 1) {
    progress.run(run + 1, RUNS);
    results.push(await oneRun(url, client, run));
  }

  progress.section('P2 against connections');
  const curve = await throughputCurve(url, progress);

  progress.section('checkout placeOrder');
  const checkout = await checkoutPath(url, client, progress);

  progress.section('worker job dedupe');
  const jobs = await jobDedupe(databaseUrl, client, progress);

  progress.section('pgbench floor');
  log(`pgbench floor (${PGBENCH_SECONDS} s × ${RUNS} runs, 1 client)`);
  const floor = pgbenchFloor(databaseUrl);

  // Peers on the same handler (apps/bench/src/peers/): own server processes on this scratch database.
  progress.section('peers');
  const peers: PeersResult | { skipped: string } = peerSettings
    ? await runPeerBench({
        databaseUrl,
        settings: peerSettings,
        log: progress.logger((line) => log(`peers: ${line}`)),
        verbose: VERBOSE,
      }).catch((error: unknown) => ({ skipped: messageOf(error) }))
    : { skipped: 'BENCH_PEERS=0' };

  progress.section('client size (P7)');
  const bundle = clientSize();

  // Last: its million-row loads and deletes write gigabytes of WAL, which would slow the commits of whatever
  // ran after it.
  progress.section('storage (P6, growth)');
  let storage: unknown = keptStorageResults();
  let storageRun: StorageBenchResult | { skipped: string } = { skipped: 'BENCH_STORAGE=0' };
  if (storageSettings) {
    const storageTeardown = new Teardown();
    teardown.add(() => storageTeardown.run());
    storageRun = await runStorageBench({
      adminUrl,
      settings: storageSettings,
      teardown: storageTeardown,
      log: progress.logger((line) => log(`storage: ${line}`)),
      command: 'pnpm bench',
    }).catch((error: unknown) => ({ skipped: messageOf(error) }));
    await storageTeardown.run();
    if ('skipped' in storageRun) log(`storage section failed: ${storageRun.skipped}`);
    else storage = storageRun;
  }

  const p1Ratio = median(results.map((r) => r.p1.protected / r.p1.unprotected));
  const p2Ratio = median(results.map((r) => r.p2.protected / r.p2.unprotected));
  const p3Ratio = median(results.map((r) => r.p3.replayP50 / r.p3.firstP50));
  const p5Ratio = median(results.map((r) => r.p5.wallMs / r.p5.controlWallMs));
  // The floors: what the same figure would be if the layer cost nothing beyond the app's route itself.
  const p3Floor = median(results.map((r) => r.p3.noopP50 / r.p3.firstP50));
  const p5ReplayFloor = median(results.map((r) => r.p5.replayWallMs / r.p5.controlWallMs));
  const p5NoopFloor = median(results.map((r) => r.p5.noopWallMs / r.p5.controlWallMs));
  const failures = results.reduce((sum, r) => sum + r.failures, 0);
  const ms = (values: number[]) => `${median(values).toFixed(2)} ms`;

  const figures: Figure[] = [
    figure({
      id: 'P1',
      label: 'P1 first execution p50, protected / unprotected',
      value: p1Ratio,
      before: BEFORE.P1,
      target: '≤ 1.10',
      bound: 1.1,
      upper: true,
      detail: `${ms(results.map((r) => r.p1.protected))} / ${ms(results.map((r) => r.p1.unprotected))} (test server, 1 connection, ${P1_SECONDS} s each)`,
    }),
    ...peerFigures(peers),
    figure({
      id: 'P2',
      label: 'P2 throughput @32, protected / unprotected',
      value: p2Ratio,
      before: BEFORE.P2,
      target: '≥ 0.90',
      bound: 0.9,
      upper: false,
      detail: `${median(results.map((r) => r.p2.protected)).toFixed(0)} / ${median(results.map((r) => r.p2.unprotected)).toFixed(0)} req/s (test server, ${P2_SECONDS} s each); against connections: ${curve.map((l) => `@${l.connections} ${l.ratio.toFixed(2)}`).join(', ')}`,
    }),
    figure({
      id: 'P3',
      label: 'P3 replay p50 / first-execution p50',
      value: p3Ratio,
      before: BEFORE.P3,
      target: '≤ 0.35',
      bound: 0.35,
      upper: true,
      detail: `${ms(results.map((r) => r.p3.replayP50))} / ${ms(results.map((r) => r.p3.firstP50))} (${P3_KEYS} keys, 1 connection); rows written by replays: ${results.reduce((sum, r) => sum + r.p3.replayEffects, 0)}; floor: the route with no database work of its own ${ms(results.map((r) => r.p3.noopP50))} = ${p3Floor.toFixed(2)} of a first execution`,
    }),
    figure({
      id: 'P5-executions',
      label: `P5 executions of ${P5_BURST} same-key requests`,
      value: Math.max(...results.map((r) => r.p5.executions)),
      target: '= 1',
      bound: 1,
      upper: true,
      detail: `per run: ${results.map((r) => r.p5.executions).join(', ')}; statuses: ${results.map((r) => JSON.stringify(r.p5.statuses)).join(' ')}`,
    }),
    figure({
      id: 'P5',
      label: 'P5 same-key burst wall / distinct-key burst',
      value: p5Ratio,
      before: BEFORE.P5,
      target: '≤ 0.6',
      bound: 0.6,
      upper: true,
      detail: `${ms(results.map((r) => r.p5.wallMs))} / ${ms(results.map((r) => r.p5.controlWallMs))} (${P5_BURST} at once; the control: unprotected, distinct keys); floors, same control: ${P5_BURST} replays of a finished key ${p5ReplayFloor.toFixed(2)}, ${P5_BURST} requests with no database work of their own ${p5NoopFloor.toFixed(2)}`,
    }),
    ...storageFigures(storage, 'skipped' in storageRun ? storageRun.skipped : null),
    ...clientSizeFigures(bundle),
    figure({
      id: 'checkout',
      label: 'checkout placeOrder p50, with / without the layer',
      value: checkout.ratio,
      target: 'info',
      info: true,
      bound: 1,
      upper: true,
      detail: `${checkout.protectedP50.toFixed(2)} / ${checkout.unprotectedP50.toFixed(2)} ms, +${checkout.addedMs.toFixed(2)} ms (external mode, provider on loopback, 1 connection, ${ORDER_SECONDS} s each)`,
    }),
  ];
  if (!('skipped' in jobs)) {
    figures.push(
      figure({
        id: 'job-dedupe',
        label: 'worker fulfilment job, with / without its dedupe',
        value: jobs.firstP50 / jobs.withoutDedupeP50,
        target: 'info',
        info: true,
        bound: 1,
        upper: true,
        detail: `first delivery ${jobs.firstP50.toFixed(2)} / ${jobs.withoutDedupeP50.toFixed(2)} ms p50 (${jobs.addedMs >= 0 ? '+' : ''}${jobs.addedMs.toFixed(2)} ms per job); a duplicate delivery, absorbed: ${jobs.duplicateP50.toFixed(2)} ms (${jobs.jobs} jobs each)`,
      }),
    );
  }
  if ('ratio' in floor) {
    figures.push(
      figure({
        id: 'floor',
        label: 'pgbench floor (claim tx / insert tx)',
        value: floor.ratio,
        target: 'info',
        info: true,
        bound: 1,
        upper: true,
        detail: `claim+insert+complete ${floor.claimMs.toFixed(3)} ms / insert ${floor.baselineMs.toFixed(3)} ms (pgbench, 1 client, ${PGBENCH_SECONDS} s × ${floor.runs})`,
      }),
    );
  }

  const machine = {
    cpus: os.cpus().length,
    node: process.version,
    postgres: pgVersion,
    platform: `${os.platform()} ${os.release()}`,
    // A shared machine: how busy it was when the run started and ended (1-minute load averages).
    loadAverage: { start: loadAtStart, end: os.loadavg()[0] ?? Number.NaN },
  };
  const date = new Date().toISOString();
  const context =
    `Measured ${date.slice(0, 16).replace('T', ' ')} UTC by \`${QUICK ? 'BENCH_QUICK=1 ' : ''}pnpm bench\` ` +
    `(${machine.cpus} cores, Node ${machine.node}, PostgreSQL ${machine.postgres}; load average ${machine.loadAverage.start.toFixed(1)} at the start, ${machine.loadAverage.end.toFixed(1)} at the end; ${RUNS} runs; medians of per-run ratios)` +
    `${QUICK ? ' — QUICK MODE: short runs, not comparable' : ''}. "Before": issue 14's measurement of main, 2026-12-01.`;
  const markdown = summaryMarkdown(figures, context);
  console.log(`\n${markdown}\n`);
  if (!('ratio' in floor)) console.log(`pgbench floor skipped: ${floor.skipped}`);
  if (failures > 0) console.log(`WARNING: ${failures} non-2xx responses or connection errors during P1–P3`);
  console.log(`\nPeers on the same handler:\n\n${formatPeersReport(peers)}`);

  const json = {
    date,
    command: `pnpm build && ${QUICK ? 'BENCH_QUICK=1 ' : ''}pnpm bench`,
    quick: QUICK,
    machine,
    settings: {
      runs: RUNS,
      p1Seconds: P1_SECONDS,
      p2Seconds: P2_SECONDS,
      p2Connections: P2_CONNECTIONS,
      p3Keys: P3_KEYS,
      p5Burst: P5_BURST,
      pgbenchSeconds: PGBENCH_SECONDS,
      curveConnections: CURVE_CONNECTIONS,
      curveRounds: CURVE_ROUNDS,
      curveSeconds: CURVE_SECONDS,
      orderSeconds: ORDER_SECONDS,
    },
    figures: figures.map(({ bound: _bound, upper: _upper, ...entry }) => entry),
    pgbenchFloor: floor,
    failures,
    runs: results,
    throughputCurve: curve,
    checkout,
    jobDedupe: jobs,
    clientSize: bundle,
    peers,
    // This run's storage section, or (BENCH_STORAGE=0, or it failed) the one the last run left in the file.
    storage,
    ...('skipped' in storageRun ? { storageNotRun: storageRun.skipped } : {}),
  };
  writeFileSync(path.join(repoRoot, 'docs/bench-results.json'), `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(
    path.join(repoRoot, 'docs/bench-chart.svg'),
    svgChart(
      figures,
      curve,
      `Idem, issue 14 figures (median of ${RUNS} runs, ${machine.cpus} cores, Node ${machine.node}${QUICK ? ', QUICK MODE' : ''})`,
    ),
  );
  writeSummaryIntoBenchmarks(markdown);
  log('wrote docs/bench-results.json, docs/bench-chart.svg and the summary in docs/BENCHMARKS.md');
}

/** Peers: Idem's cost on a bare tRPC server, and P4 — Idem's added p50 ÷ the best Redis peer's, per round. */
function peerFigures(peers: PeersResult | { skipped: string }): Figure[] {
  if ('skipped' in peers) return [];
  const idem = peers.arms.find((arm) => arm.id === 'idem');
  const added = (round: PeersResult['rounds'][number], id: ArmId) => {
    const baseline = arms[id].baseline;
    return baseline ? round.p1Ms[id] - round.p1Ms[baseline] : Number.NaN;
  };
  const redisPeers = ['node-idempotency', 'powertools'] as const;
  // Added p50 per round (protected − its own framework's unprotected route), then the median over the rounds.
  // The ratio is of the two medians: a per-round ratio is meaningless in a round where the peer's added cost is
  // within noise of zero or below it.
  const idemAdded = median(peers.rounds.map((round) => added(round, 'idem')));
  const bestAdded = median(
    peers.rounds.map((round) => Math.min(...redisPeers.map((id) => added(round, id)))),
  );
  const p4 = bestAdded > 0 ? idemAdded / bestAdded : Number.NaN;
  const redisRatios = redisPeers
    .map((id) => `${arms[id].label} ${peers.arms.find((arm) => arm.id === id)?.p1Ratio?.toFixed(2) ?? '?'}`)
    .join(', ');
  return [
    figure({
      id: 'peers',
      label: 'peers: Idem on bare tRPC ÷ the same route unprotected',
      value: idem?.p1Ratio ?? Number.NaN,
      before: BEFORE.peers,
      target: '≤ 1.20',
      bound: 1.2,
      upper: true,
      detail: `p50 @1 connection, median of ${peers.rounds.length} rounds; the Redis peers on their own frameworks: ${redisRatios}`,
    }),
    figure({
      id: 'P4',
      label: "P4 Idem's added p50 ÷ the best Redis peer's",
      value: p4,
      before: BEFORE.P4,
      target: '≤ 1.0',
      bound: 1,
      upper: true,
      detail: `Idem +${idemAdded.toFixed(2)} ms vs the best Redis peer +${bestAdded.toFixed(2)} ms (median over the rounds of each one's p50 minus its own framework's unprotected p50; n/a when the peer's is ≤ 0, i.e. noise)`,
    }),
  ];
}

/**
 * P6: the worst claim while the worker deletes the expired keys (the first cleanup run: the default batch) and
 * while a CHECKPOINT right after it writes out what it dirtied — the cleanup's full cost to the server.
 */
function storageFigures(storage: unknown, notRun: string | null): Figure[] {
  const p6 = (storage as Partial<StorageBenchResult> | undefined)?.p6;
  const first = p6?.runs[0];
  if (!first) return [];
  // Results kept from a run before the checkpoint window existed have no `after`.
  const after = first.after as typeof first.during | undefined;
  return [
    figure({
      id: 'P6',
      label: 'P6 worst claim during the cleanup of expired keys and its checkpoint',
      value: Math.max(first.during.worst, after?.worst ?? 0),
      before: BEFORE.P6,
      unit: 'ms',
      target: '≤ 50 ms',
      bound: 50,
      upper: true,
      detail: `${first.loadedExpired.toLocaleString('en')} expired keys deleted in ${((first.cleanup?.ms ?? Number.NaN) / 1000).toFixed(1)} s (${first.label}); claims during it: p50 ${first.during.p50.toFixed(2)} / p99 ${first.during.p99.toFixed(2)} / worst ${first.during.worst.toFixed(1)} ms; WAL ${(first.walBytes / 2 ** 20).toFixed(0)} MiB${after ? `; during a CHECKPOINT forced right after it (${(first.afterCheckpointMs / 1000).toFixed(1)} s): p99 ${after.p99.toFixed(2)} / worst ${after.worst.toFixed(1)} ms` : ''}${first.checkpointMs === undefined ? '; the load NOT checkpointed first' : '; the load checkpointed first'}${notRun ? ` (NOT this run's: kept from the last storage run; this run's storage section: ${notRun})` : ''}`,
    }),
  ];
}

function clientSizeFigures(bundle: ClientSize[] | { skipped: string }): Figure[] {
  if ('skipped' in bundle) return [];
  const checkout = bundle[0];
  if (!checkout) return [];
  return [
    figure({
      id: 'P7',
      label: 'P7 client library in the checkout bundle, min+gz',
      value: checkout.gzipped / 1024,
      before: BEFORE.P7,
      unit: 'kB',
      target: '≤ 3.0 kB',
      bound: 3,
      upper: true,
      detail: `${checkout.entry}: ${(checkout.minified / 1024).toFixed(2)} kB min (esbuild, gzip -9; pnpm bench:client-size)`,
    }),
  ];
}

const teardown = new Teardown('[bench] cleanup');
stopOnSignals(teardown);
main(teardown)
  .catch((error) => {
    console.error(`[bench] ${messageOf(error)}`);
    process.exitCode = 1;
  })
  .finally(() => teardown.run());
