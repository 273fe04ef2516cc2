/**
 * The pure part of `pnpm bench:load-profile` (load-profile.ts): what a `pg_stat_activity` row says a backend is
 * doing, the statement it runs (or last ran), and the budget table from the rounds' measurements.
 */
import { median } from '../stats.ts';
import { formatValue, formatWithSpread } from '../summary.ts';
import type { ProbeWindow } from './load-probe.ts';

/** The columns of `pg_stat_activity` a sample reads, per backend of the app's pool. */
export interface ActivityRow {
  pid: number;
  state: string | null;
  wait_event_type: string | null;
  wait_event: string | null;
  query: string | null;
}

/**
 * One backend's state in a sample: `active: on CPU` (running, no wait event), `active: <type>:<event>` (running
 * and waiting: Lock:transactionid, IO:WALSync, LWLock:WALWrite, …), `idle in transaction` (inside a transaction,
 * waiting for the app's next statement: the database waits for the app), `idle` (in the pool, between
 * transactions).
 */
export function stateOf(row: Pick<ActivityRow, 'state' | 'wait_event_type' | 'wait_event'>): string {
  if (row.state === 'active') {
    return row.wait_event_type === null
      ? 'active: on CPU'
      : `active: ${row.wait_event_type}:${row.wait_event ?? '?'}`;
  }
  return row.state ?? 'no state';
}

/**
 * What a statement is, in a few words: `begin`, `commit`, `insert into bench_effects`, `update idempotency_keys`,
 * `select … from api_tokens`. For an `idle in transaction` backend it is the statement it ran last: what the app
 * is doing now follows it.
 */
export function statementOf(query: string | null): string {
  if (query === null) return '?';
  // The idempotency store labels its statements (`/* idem:claim */ …`, statement-names.ts): the label says more.
  const label = /^\s*\/\* idem:([\w-]+) \*\//.exec(query)?.[1];
  if (label) return `idem:${label}`;
  const text = query
    .replace(/--[^\n]*/g, ' ')
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .toLowerCase();
  const table = (from: RegExp) =>
    from
      .exec(text)?.[1]
      ?.replaceAll('"', '')
      .replace(/^public\./, '');
  const head = /^(\w+)/.exec(text)?.[1] ?? '';
  if (head === 'insert') return `insert into ${table(/^insert into ([\w."]+)/) ?? '?'}`;
  if (head === 'update') return `update ${table(/^update ([\w."]+)/) ?? '?'}`;
  if (head === 'delete') return `delete from ${table(/^delete from ([\w."]+)/) ?? '?'}`;
  if (head === 'select' || head === 'with') return `${head} … from ${table(/ from ([\w."]+)/) ?? '?'}`;
  return head === '' ? '?' : head;
}

/** One arm's measurements in one round. */
export interface ArmRound {
  round: number;
  requests: number;
  failed: number;
  seconds: number;
  rps: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyMeanMs: number;
  /** Samples of `pg_stat_activity` taken, and how far apart on average (ms). */
  samples: number;
  sampleIntervalMs: number;
  /** Backend-samples per `stateOf`, over the app's backends. */
  states: Record<string, number>;
  /** `idle in transaction` backend-samples per `statementOf` its last statement. */
  idleInTransactionAfter: Record<string, number>;
  /** `active` backend-samples per `statementOf` the statement. */
  activeIn: Record<string, number>;
  /** The server process's own view (load-probe.ts); null when its probe did not answer. */
  probe: ProbeWindow | null;
  /**
   * CPU, % of one core over the round: used by the server process, its Postgres backends (summed) and this
   * process, and the machine's busy share of all its cores; `serverRunQueue` / `backendsRunQueue`: time the
   * server's main thread (the event loop) / the backends spent runnable but waiting for a core
   * (/proc/<pid>/schedstat), % of the round.
   */
  cpu: {
    server: number;
    backends: number;
    loadGenerator: number;
    machineBusyPercent: number;
    serverRunQueue: number;
    backendsRunQueue: number;
  };
  loadAverage: number;
}

export interface BudgetInput {
  arms: Record<string, ArmRound[]>;
  connections: number;
}

const share = (counts: Record<string, number>, key: string) => {
  const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
  return total === 0 ? Number.NaN : (100 * (counts[key] ?? 0)) / total;
};

/** "12.3 (10.1–14.0, 3 runs)": the median over the rounds with their min–max. */
const spread = (runs: number[], unit?: string) =>
  formatWithSpread({ value: median(runs), runs, ...(unit ? { unit } : {}) });

/** The main (largest) pool of the server process in a round's probe window. */
export function mainPool(round: ArmRound): ProbeWindow['pools'][number] | undefined {
  return [...(round.probe?.pools ?? [])].sort(
    (a, b) =>
      b.checkouts.transaction.count +
      b.checkouts.query.count -
      a.checkouts.transaction.count -
      a.checkouts.query.count,
  )[0];
}

/**
 * Per request the server answered in the window, ms (means): its time in the server process, split by what it
 * did (load-probe.ts: each moment once — holding a connection for its transaction, holding one for a statement,
 * waiting for one, or none of these: JavaScript and its turns on the event loop), and the client's latency
 * beyond it.
 */
export function perRequest(round: ArmRound) {
  const pool = mainPool(round);
  const requests = round.probe?.requests.finished ?? Number.NaN;
  const split = round.probe?.split;
  const per = (ms: number | undefined) => (ms ?? Number.NaN) / requests;
  const inServer = per(round.probe?.requests.sumMs);
  const tx = pool?.checkouts.transaction;
  const query = pool?.checkouts.query;
  return {
    holdTx: per(split?.holdTransaction),
    holdQuery: per(split?.holdQuery),
    waitTx: per(split?.waitTransaction),
    waitQuery: per(split?.waitQuery),
    rest: per(split?.other),
    inServer,
    outsideServer: round.latencyMeanMs - inServer,
    txPerRequest: per(tx?.count),
    queriesPerRequest: per(query?.count),
    queuedShare: tx && tx.count > 0 ? (100 * tx.queued) / tx.count : Number.NaN,
  };
}

type Row = [label: string, cell: (rounds: ArmRound[]) => string];

/** A row whose cell is the median over the rounds of `pick` with its min–max. */
const spreadRow = (label: string, pick: (round: ArmRound) => number): Row => [
  label,
  (rounds) => spread(rounds.map(pick)),
];

/** A row of several medians over the rounds, "a / b / c". */
const mediansRow = (label: string, ...picks: Array<(round: ArmRound) => number>): Row => [
  label,
  (rounds) => picks.map((pick) => formatValue(median(rounds.map(pick)))).join(' / '),
];

/** The rows of a request's time, each the mean per request of one part of `perRequest`, in the table's order. */
const REQUEST_SPLIT_ROWS: Array<[label: string, part: keyof ReturnType<typeof perRequest>]> = [
  [
    '**per request, ms (mean):** outside the server process (sockets, accept queue, the load generator)',
    'outsideServer',
  ],
  ['… inside the server process (request parsed → answer written)', 'inServer'],
  ['… … waiting for a pooled connection: the transaction', 'waitTx'],
  ['… … waiting for a pooled connection: statements outside a transaction', 'waitQuery'],
  ['… … holding a connection: the transaction (BEGIN … COMMIT and the app between)', 'holdTx'],
  ['… … holding a connection: statements outside a transaction (the principal, …)', 'holdQuery'],
  ['… … the rest: JavaScript and its turns on the event loop (HTTP, tRPC, JSON)', 'rest'],
];

/** The budget as a Markdown table: one column per arm, each cell the median over the rounds with its min–max. */
export function budgetMarkdown({ arms, connections }: BudgetInput): string {
  const names = Object.keys(arms);
  const pool = (round: ArmRound) => mainPool(round);
  const tx = (round: ArmRound) => pool(round)?.checkouts.transaction;
  const loop = (round: ArmRound) => round.probe?.eventLoop;
  const nan = Number.NaN;
  const rows: Row[] = [
    spreadRow('throughput, req/s', (x) => x.rps),
    mediansRow(
      "latency p50 / p99 (the load generator's), ms",
      (x) => x.latencyP50Ms,
      (x) => x.latencyP99Ms,
    ),
    spreadRow('latency mean, ms', (x) => x.latencyMeanMs),
    ...REQUEST_SPLIT_ROWS.map(([label, part]) => spreadRow(label, (x) => perRequest(x)[part])),
    mediansRow(
      'pool: size / mean waiting (sampled) / mean idle',
      (x) => pool(x)?.max ?? nan,
      (x) => pool(x)?.meanWaiting ?? nan,
      (x) => pool(x)?.meanIdle ?? nan,
    ),
    mediansRow(
      'pool: transactions / statements outside one, per request',
      (x) => perRequest(x).txPerRequest,
      (x) => perRequest(x).queriesPerRequest,
    ),
    spreadRow('pool: transaction checkouts that queued, %', (x) => perRequest(x).queuedShare),
    mediansRow(
      'pool: transaction checkout wait p50 / p99, ms',
      (x) => tx(x)?.waitP50Ms ?? nan,
      (x) => tx(x)?.waitP99Ms ?? nan,
    ),
    mediansRow(
      'pool: transaction hold p50 / p99, ms',
      (x) => tx(x)?.holdP50Ms ?? nan,
      (x) => tx(x)?.holdP99Ms ?? nan,
    ),
    spreadRow('server event loop: utilization, %', (x) => 100 * (loop(x)?.utilization ?? nan)),
    mediansRow(
      'server event loop: delay p50 / p99 / max, ms',
      (x) => loop(x)?.delayP50Ms ?? nan,
      (x) => loop(x)?.delayP99Ms ?? nan,
      (x) => loop(x)?.delayMaxMs ?? nan,
    ),
    spreadRow('CPU, % of one core: the server process', (x) => x.cpu.server),
    spreadRow("… the app's Postgres backends (summed)", (x) => x.cpu.backends),
    spreadRow('… the load generator (autocannon, this process)', (x) => x.cpu.loadGenerator),
    // CPU % of a core × 10 ÷ req/s = CPU ms per request: what a request costs whatever the machine's load.
    spreadRow('CPU per request, ms: the server process', (x) => (10 * x.cpu.server) / x.rps),
    spreadRow("… the app's Postgres backends", (x) => (10 * x.cpu.backends) / x.rps),
    spreadRow(
      "waiting for a core (runnable, not running), % of the round: the server's event-loop thread",
      (x) => x.cpu.serverRunQueue,
    ),
    spreadRow("… the app's Postgres backends (summed)", (x) => x.cpu.backendsRunQueue),
    mediansRow(
      'machine: busy, % of all cores / 1-min load average',
      (x) => x.cpu.machineBusyPercent,
      (x) => x.loadAverage,
    ),
    mediansRow(
      'pg_stat_activity: samples per round / mean interval, ms',
      (x) => x.samples,
      (x) => x.sampleIntervalMs,
    ),
  ];
  // The states, most frequent first (over all arms), then what an active backend runs and what an
  // idle-in-transaction one ran last.
  const keys = (pick: (round: ArmRound) => Record<string, number>) => {
    const counts = new Map<string, number>();
    for (const round of Object.values(arms).flat())
      for (const [key, n] of Object.entries(pick(round))) counts.set(key, (counts.get(key) ?? 0) + n);
    return [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([key]) => key);
  };
  for (const state of keys((round) => round.states))
    rows.push(spreadRow(`backends: \`${state}\`, % of samples`, (x) => share(x.states, state)));
  for (const statement of keys((round) => round.activeIn))
    rows.push(
      spreadRow(`… \`active\` in \`${statement}\`, % of active samples`, (x) => share(x.activeIn, statement)),
    );
  for (const statement of keys((round) => round.idleInTransactionAfter))
    rows.push(
      spreadRow(`… \`idle in transaction\` after \`${statement}\`, % of idle-in-transaction samples`, (x) =>
        share(x.idleInTransactionAfter, statement),
      ),
    );
  return [
    `| at ${connections} connections | ${names.join(' | ')} |`,
    `|---|${names.map(() => '---|').join('')}`,
    ...rows.map(
      ([label, cell]) => `| ${label} | ${names.map((name) => cell(arms[name] ?? [])).join(' | ')} |`,
    ),
  ].join('\n');
}
