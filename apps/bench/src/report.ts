/**
 * What `pnpm bench` leaves behind: issue 14's table (and the peers' tables) on stdout, docs/bench-results.json
 * (the settings and every run's raw figures), docs/bench-chart.svg and the generated summary block of
 * docs/BENCHMARKS.md.
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { svgChart } from './chart.ts';
import { log } from './log.ts';
import type { BenchOptions } from './options.ts';
import { formatPeersReport } from './peers/report.ts';
import type { PeersResult, PeersSkipped } from './peers/results.ts';
import { writeVersusRedis } from './peers/versus-redis.ts';
import { repoRoot } from './repository.ts';
import * as checkout from './sections/checkout.ts';
import type { Skipped } from './sections/context.ts';
import * as jobDedupe from './sections/job-dedupe.ts';
import * as p1 from './sections/p1.ts';
import * as p2 from './sections/p2.ts';
import type { CurveLevel } from './sections/p2-curve.ts';
import * as p3 from './sections/p3.ts';
import * as p5 from './sections/p5.ts';
import * as clientSize from './sections/p7-client-size.ts';
import * as peers from './sections/peers.ts';
import * as pgbenchFloor from './sections/pgbench-floor.ts';
import * as runs from './sections/runs.ts';
import * as storage from './sections/storage.ts';
import { type Figure, spreadOf, summaryMarkdown, writeSummaryIntoBenchmarks } from './summary.ts';

/** Every section's outcome, in the order they ran. */
export interface BenchResults {
  runs: runs.MainRun[];
  curve: CurveLevel[];
  checkout: checkout.CheckoutPath;
  jobs: jobDedupe.JobDedupe | Skipped;
  floor: pgbenchFloor.PgbenchFloor | Skipped;
  peers: PeersResult | PeersSkipped;
  clientSize: clientSize.ClientSize[] | Skipped;
  storage: storage.StorageOutcome;
}

/** What the run measured on, besides this process's machine. */
export interface Conditions {
  postgresVersion: string;
  /** The 1-minute load average when the run started. */
  loadAtStart: number;
}

/** The table's rows, in its order; a section that did not run has none (P6 keeps the last storage run's). */
export function figuresOf(results: BenchResults, options: BenchOptions): Figure[] {
  const perRun = <K extends keyof runs.MainRun>(key: K) => results.runs.map((run) => run[key]);
  return [
    ...p1.figures(perRun('p1'), options),
    ...peers.figures(results.peers),
    ...p2.figures(perRun('p2'), results.curve, options),
    ...p3.figures(perRun('p3'), options),
    ...p5.figures(perRun('p5'), options),
    ...storage.figures(results.storage),
    ...clientSize.figures(results.clientSize),
    ...checkout.figures(results.checkout, options),
    ...jobDedupe.figures(results.jobs),
    ...pgbenchFloor.figures(results.floor, options),
  ];
}

/** A figure as docs/bench-results.json records it: the runs (NaN → null in JSON) and their min and max. */
export function figureRecord({ bound: _bound, upper: _upper, ...entry }: Figure) {
  return { ...entry, spread: spreadOf(entry.runs) };
}

export function writeReport(results: BenchResults, options: BenchOptions, conditions: Conditions): void {
  const figures = figuresOf(results, options);
  const failures = runs.failures(results.runs);
  const quick = options.quick ? 'BENCH_QUICK=1 ' : '';
  const machine = {
    cpus: os.cpus().length,
    node: process.version,
    postgres: conditions.postgresVersion,
    platform: `${os.platform()} ${os.release()}`,
    // A shared machine: how busy it was when the run started and ended (1-minute load averages).
    loadAverage: { start: conditions.loadAtStart, end: os.loadavg()[0] ?? Number.NaN },
  };
  const date = new Date().toISOString();
  const context =
    `Measured ${date.slice(0, 16).replace('T', ' ')} UTC by \`${quick}pnpm bench\` ` +
    `(${machine.cpus} cores, Node ${machine.node}, PostgreSQL ${machine.postgres}; load average ${machine.loadAverage.start.toFixed(1)} at the start, ${machine.loadAverage.end.toFixed(1)} at the end; ${options.runs} runs; medians of per-run ratios, each with the min–max of the runs it is the median of — the machine is shared, so a difference inside that range is noise)` +
    `${options.quick ? ' — QUICK MODE: short runs, not comparable' : ''}. "Before": issue 14's measurement of main, 2026-12-01.`;
  const markdown = summaryMarkdown(figures, context);
  console.log(`\n${markdown}\n`);
  if ('skipped' in results.floor) console.log(`pgbench floor skipped: ${results.floor.skipped}`);
  if (failures > 0) console.log(`WARNING: ${failures} non-2xx responses or connection errors during P1–P3`);
  console.log(`\nPeers on the same handler:\n\n${formatPeersReport(results.peers)}`);
  const versusRedis =
    'skipped' in results.peers ? null : writeVersusRedis(results.peers, `${quick}pnpm bench`);

  const json = {
    date,
    command: `pnpm build && ${quick}pnpm bench`,
    quick: options.quick,
    machine,
    settings: {
      runs: options.runs,
      p1Seconds: options.p1Seconds,
      p2Seconds: options.p2Seconds,
      p2Connections: options.p2Connections,
      p3Keys: options.p3Keys,
      p5Burst: options.p5Burst,
      pgbenchSeconds: options.pgbenchSeconds,
      curveConnections: options.curveConnections,
      curveRounds: options.curveRounds,
      curveSeconds: options.curveSeconds,
      orderSeconds: options.orderSeconds,
    },
    // The chart's bound and direction are not part of the record; each figure's runs and their spread are.
    figures: figures.map(figureRecord),
    pgbenchFloor: results.floor,
    failures,
    runs: results.runs,
    throughputCurve: results.curve,
    checkout: results.checkout,
    jobDedupe: results.jobs,
    clientSize: results.clientSize,
    peers: results.peers,
    // Issue 32's table and targets, from the peers' rounds (null when the peers section did not run).
    peersVersusRedis: versusRedis,
    // This run's storage section, or (BENCH_STORAGE=0, or it failed) the one the last run left in the file.
    storage: results.storage.results,
    ...(results.storage.notRun === null ? {} : { storageNotRun: results.storage.notRun }),
  };
  writeFileSync(path.join(repoRoot, 'docs/bench-results.json'), `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(
    path.join(repoRoot, 'docs/bench-chart.svg'),
    svgChart(
      figures,
      results.curve,
      `Idem, issue 14 figures (median of ${options.runs} runs, ${machine.cpus} cores, Node ${machine.node}${options.quick ? ', QUICK MODE' : ''})`,
    ),
  );
  writeSummaryIntoBenchmarks(markdown);
  log('wrote docs/bench-results.json, docs/bench-chart.svg and the summaries in docs/BENCHMARKS.md');
}
