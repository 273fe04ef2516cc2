/**
 * Issue 32's table, from one peers run: each protected contender's throughput at 32 connections, replay cost and
 * first-execution cost against its own unprotected route, every figure the median of the rounds with their
 * min–max; then the issue's targets judged on the same rounds, each missed one beside the floor measured in the
 * same run. "Before" is the issue's own two runs of main (2026-12-02 17:16 and 17:36 UTC, same harness).
 */
import { median } from '../stats.ts';
import { formatWithSpread, writeSummaryIntoBenchmarks } from '../summary.ts';
import { type ArmId, arms, redisPeerIds } from './contenders.ts';
import type { PeersResult, RoundResult } from './results.ts';

type Round = RoundResult;
type Measure = (round: Round, id: ArmId) => number;

/** A round's protected throughput ÷ its own framework's unprotected throughput. */
const throughputRatio: Measure = (round, id) => {
  const baseline = arms[id].baseline;
  return baseline ? round.p2Rps[id] / round.p2Rps[baseline] : Number.NaN;
};
/** A round's replay p50 ÷ first-execution p50 (the same keys, sent again after they completed). */
const replayRatio: Measure = (round, id) =>
  (round.replay[id]?.replayP50 ?? Number.NaN) / (round.replay[id]?.firstP50 ?? Number.NaN);
/** A round's protected p50 ÷ its own framework's unprotected p50, at one connection. */
const firstRatio: Measure = (round, id) => {
  const baseline = arms[id].baseline;
  return baseline ? round.p1Ms[id] / round.p1Ms[baseline] : Number.NaN;
};

/** CPU milliseconds per request of an arm's throughput window, its whole stack: server, Postgres, Redis. */
const stackCpu = (round: Round, id: ArmId) => {
  const cpu = round.p2CpuMs?.[id];
  return cpu ? cpu.server + cpu.postgres + cpu.redis : Number.NaN;
};
/** A round's whole-stack CPU per request, protected ÷ its own framework's unprotected (the inverse of throughput). */
const cpuRatio: Measure = (round, id) => {
  const baseline = arms[id].baseline;
  return baseline ? stackCpu(round, id) / stackCpu(round, baseline) : Number.NaN;
};

/** The table's rows: what is measured, how, and the issue's "before" per contender (its two runs). */
const ROWS: Array<{ label: string; measure: Measure; before: Partial<Record<ArmId, string>> }> = [
  {
    label: 'throughput @32, protected ÷ its own unprotected server',
    measure: throughputRatio,
    before: {
      idem: '0.60 / 0.67',
      'node-idempotency': '0.93 / 0.95',
      powertools: '1.00 / 0.83',
      'express-idempotency': '0.56 / 0.55',
    },
  },
  {
    label: 'CPU per request @32 (its server + Postgres + Redis), protected ÷ its own unprotected server',
    measure: cpuRatio,
    before: {},
  },
  {
    label: 'replay p50 ÷ first-execution p50',
    measure: replayRatio,
    before: {
      idem: '0.55 / 0.49',
      'node-idempotency': '0.17 / 0.16',
      powertools: '0.19 / 0.19',
      'express-idempotency': '0.21 / 0.21',
    },
  },
  {
    label: 'first execution p50 ÷ its own unprotected server (@1)',
    measure: firstRatio,
    before: {
      idem: '1.32 / 1.27',
      'node-idempotency': '1.31 / 1.39',
      powertools: '1.41 / 1.42',
      'express-idempotency': '1.33 / 1.32',
    },
  },
];

const CONTENDERS: readonly ArmId[] = [
  'idem',
  'idem-replay-cache',
  'node-idempotency',
  'powertools',
  'express-idempotency',
];

/** The replay target: a replay costs at most this share of a first execution. */
const REPLAY_TARGET = 0.25;

/** A value of the rounds as the tables show it: "0.85 (0.80–0.90, 5 runs)". */
function shown(runs: number[], bold = false): string {
  return formatWithSpread({ value: median(runs), runs }, bold);
}

/** One of the issue's targets, judged on the rounds: `value` is the median of `runs`. */
export interface VersusRedisTarget {
  label: string;
  target: string;
  value: number;
  runs: number[];
  met: boolean;
  detail: string;
}

export interface VersusRedis {
  /** Per row label, per contender: the value of each round. */
  rows: Array<{ label: string; runs: Partial<Record<ArmId, number[]>> }>;
  targets: VersusRedisTarget[];
}

export function versusRedis(peers: PeersResult): VersusRedis {
  const { rounds } = peers;
  const perRound = (measure: (round: Round) => number) => rounds.map(measure);
  const rows = ROWS.map(({ label, measure }) => ({
    label,
    runs: Object.fromEntries(CONTENDERS.map((id) => [id, perRound((round) => measure(round, id))])),
  }));

  // Throughput: Idem's ratio against the best Redis peer's, round by round (the same round's load for both).
  const bestRedisThroughput = (round: Round) =>
    Math.max(...redisPeerIds.map((id) => throughputRatio(round, id)));
  const throughputLead = perRound((round) => throughputRatio(round, 'idem') - bestRedisThroughput(round));
  const idemThroughput = perRound((round) => throughputRatio(round, 'idem'));
  const bestThroughput = perRound(bestRedisThroughput);
  const ahead = throughputLead.filter((lead) => lead >= 0).length;
  // The price of one more round trip in the transaction (Idem's statements add none: they ride with BEGIN, COMMIT).
  const oneMoreRoundTrip = perRound((round) => round.p2Rps['trpc-one-more-statement'] / round.p2Rps.trpc);
  // The library's JavaScript alone: the same middleware over a store that writes nothing.
  const javaScriptAlone = perRound((round) => round.p2Rps['idem-without-sql'] / round.p2Rps.trpc);
  // Where Idem's extra CPU per request goes, against the unprotected route of the same round, in ms.
  const extraMs = (id: ArmId, part: 'server' | 'postgres') =>
    perRound(
      (round) => (round.p2CpuMs?.[id]?.[part] ?? Number.NaN) - (round.p2CpuMs?.trpc?.[part] ?? Number.NaN),
    );
  const ms = (runs: number[]) => `${median(runs) >= 0 ? '+' : ''}${median(runs).toFixed(2)} ms`;

  // Replay: the floor of any answer on the tRPC server (a route with no work) ÷ Idem's first execution.
  const replayFloor = perRound(
    (round) => round.p1Ms['trpc-noop'] / (round.replay.idem?.firstP50 ?? Number.NaN),
  );
  const idemReplay = perRound((round) => replayRatio(round, 'idem'));
  const cachedReplay = perRound((round) => replayRatio(round, 'idem-replay-cache'));

  return {
    rows,
    targets: [
      {
        label: "throughput @32 ÷ own unprotected, Idem − the best Redis peer's (same round)",
        target: '≥ 0',
        value: median(throughputLead),
        runs: throughputLead,
        met: median(throughputLead) >= 0,
        detail:
          `Idem ${shown(idemThroughput)} vs the best Redis peer ${shown(bestThroughput)}; Idem ahead in ${ahead} of ` +
          `${rounds.length} rounds. Its JavaScript alone (the same middleware over a store that writes nothing): ` +
          `${shown(javaScriptAlone)}; the rest is its SQL. CPU per request against the unprotected route: Idem ` +
          `server ${ms(extraMs('idem', 'server'))}, Postgres ${ms(extraMs('idem', 'postgres'))}; its JavaScript ` +
          `alone: server ${ms(extraMs('idem-without-sql', 'server'))}, Postgres ` +
          `${ms(extraMs('idem-without-sql', 'postgres'))}. The SQL alone at 32 clients, Idem's and the bare ` +
          "record's: issue 14's pgbench rows. For scale, one more round trip in the transaction (the same route " +
          `with one \`select 1\` more; Idem adds none): ${shown(oneMoreRoundTrip)}. Where a request waits: ` +
          '`pnpm bench:load-profile`, "Where a protected request waits at 32 connections"',
      },
      ...[
        { label: 'Idem (the defaults)', runs: idemReplay },
        { label: 'Idem + `replayCache({ rememberCommitted: true })`', runs: cachedReplay },
      ].map(({ label, runs }) => ({
        label: `replay p50 ÷ first-execution p50, ${label}`,
        target: `≤ ${REPLAY_TARGET}`,
        value: median(runs),
        runs,
        met: median(runs) <= REPLAY_TARGET,
        detail:
          "the floor, a tRPC route on the same server that does nothing ÷ Idem's first execution: " +
          `${shown(replayFloor)} — no replay answered through tRPC can cost less`,
      })),
    ],
  };
}

const START =
  '<!-- pnpm bench: issue 32 table, generated from the peers section — edits between these markers are overwritten -->';
const END = '<!-- end of the issue 32 table -->';
export const VERSUS_REDIS_MARKERS = { start: START, end: END };

export function versusRedisMarkdown(table: VersusRedis, context: string): string {
  const header = CONTENDERS.map((id) => arms[id].label);
  const cell = (runs: number[] | undefined, before: string | undefined) =>
    `${before ? `${before} → ` : ''}${runs ? shown(runs, true) : 'n/a'}`;
  return [
    context,
    '',
    `| figure (before: the issue's two runs → now: median (min–max, rounds)) | ${header.join(' | ')} |`,
    `|---|${CONTENDERS.map(() => '---').join('|')}|`,
    ...table.rows.map(({ label, runs }) => {
      const before = ROWS.find((row) => row.label === label)?.before ?? {};
      return `| ${label} | ${CONTENDERS.map((id) => cell(runs[id], before[id])).join(' | ')} |`;
    }),
    '',
    '| target (issue 32) | now | met | detail |',
    '|---|---|---|---|',
    ...table.targets.map(
      (t) =>
        `| ${t.label} ${t.target} | ${shown(t.runs, true)} | ${t.met ? 'yes' : '**no**'} | ${t.detail} |`,
    ),
  ].join('\n');
}

/**
 * Issue 32's tables for `peers`, by `command`: printed, written into docs/BENCHMARKS.md between their markers, and
 * returned for docs/bench-results.json.
 */
export function writeVersusRedis(peers: PeersResult, command: string): VersusRedis {
  const table = versusRedis(peers);
  const { settings } = peers;
  const context =
    `Measured ${peers.date.slice(0, 16).replace('T', ' ')} UTC by \`${command}\` (the peers section: ` +
    `${settings.runs} rounds, each arm ${settings.p1Seconds} s at 1 connection and ${settings.p2Seconds} s at ` +
    `${settings.p2Connections} connections per round, interleaved; ${peers.machine.cpus} cores, Node ` +
    `${peers.machine.node}). Every figure is the median of the per-round figures, with their min–max: a ` +
    "difference inside that range is noise. P4, the third target, is in issue 14's table above.";
  const markdown = versusRedisMarkdown(table, context);
  console.log(`\n${markdown}\n`);
  writeSummaryIntoBenchmarks(markdown, VERSUS_REDIS_MARKERS);
  return table;
}
