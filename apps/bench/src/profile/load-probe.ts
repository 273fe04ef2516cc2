/**
 * Loaded into the app's test server by `pnpm bench:load-profile` (`node --import tsx --import <this file> …`):
 * what the server process itself can tell about where a request waits, read by the profiler over the IPC channel.
 *
 * - node-postgres' pools: every `Pool#connect` timed from the call to the connection (the wait for a free
 *   connection, or for a new one while the pool grows) and until its `release` (the hold). Prisma's pg adapter
 *   takes a connection with `pool.connect()` (a promise) for an interactive transaction, and `pool.query()` takes
 *   one through `connect(callback)` for a statement outside a transaction: the two kinds are told apart that
 *   way. `waitingCount`, `idleCount` and `totalCount` sampled every 20 ms.
 * - the event loop: `monitorEventLoopDelay` (10 ms resolution) and `performance.eventLoopUtilization()`.
 * - the HTTP requests: every `request` event of a node:http server until its response's `finish` (the time the
 *   request spent in this process, from its headers parsed to its answer written), and what it did meanwhile:
 *   its checkouts are its own (AsyncLocalStorage, from the `request` event), and each moment of it is counted
 *   once, as the first that applies of: holding a connection for a transaction, holding one for a statement,
 *   waiting for one for a transaction, waiting for one for a statement, none of these (`other`: JavaScript and
 *   its turns on the event loop). Were a request's checkouts to overlap (Prisma may send an operation's
 *   independent reads at once), summing them would count the same time twice; the split cannot.
 *
 * BENCH_LOAD_POOL_MAX (unset: the app's own size, 10) resizes every pool when first seen: an experiment.
 *
 * Messages: `{ probe: 'reset', profile? }` starts a new window (and a CPU profile of it, written to `profile`); `{ probe: 'read' }` answers `{ probe: 'window', window }`
 * for the window so far (a `ProbeWindow`) once no request started in it is still open (at most 5 s later), so
 * that the window's requests and its checkouts are the same requests'. Nothing is sent unasked.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { Session } from 'node:inspector/promises';
import { createRequire } from 'node:module';
import { type EventLoopUtilization, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type pg from 'pg';
import { type Interval, type Phase, splitInto } from './load-split.ts';

export type CheckoutKind = 'transaction' | 'query';

export interface CheckoutStats {
  count: number;
  /** Checkouts that found no idle connection and the pool at its size (they queued). */
  queued: number;
  /** Wait for a connection, ms: sum, p50, p99, max. */
  waitSumMs: number;
  waitP50Ms: number;
  waitP99Ms: number;
  waitMaxMs: number;
  /** From the connection to its release, ms. */
  holdSumMs: number;
  holdP50Ms: number;
  holdP99Ms: number;
}

export interface ProbeWindow {
  seconds: number;
  /**
   * Requests started in the window; of those, answered (`finish`) and closed either way (`close`: answered, or
   * the client went away — the load generator stops mid-request); the answered ones' time in this process, ms.
   */
  requests: {
    started: number;
    finished: number;
    closed: number;
    sumMs: number;
    p50Ms: number;
    p99Ms: number;
  };
  /** The answered requests' time in this process split by what they did (sums, ms). */
  split: Record<Phase, number>;
  pools: Array<{
    max: number;
    /** Means over the 20 ms samples. */
    meanWaiting: number;
    meanIdle: number;
    meanTotal: number;
    samples: number;
    checkouts: Record<CheckoutKind, CheckoutStats>;
  }>;
  eventLoop: {
    utilization: number;
    delayP50Ms: number;
    delayP99Ms: number;
    delayMaxMs: number;
    delayMeanMs: number;
  };
}

/** `profile`: a CPU profile of the window to write there on `read` (V8's profiler, through node:inspector). */
export type ProbeRequest = { probe: 'reset'; profile?: string } | { probe: 'read' };
export type ProbeAnswer = { probe: 'window'; window: ProbeWindow };

interface PoolRecord {
  pool: pg.Pool;
  max: number;
  waiting: number;
  idle: number;
  total: number;
  samples: number;
  waits: Record<CheckoutKind, number[]>;
  holds: Record<CheckoutKind, number[]>;
  queued: Record<CheckoutKind, number>;
}

const require = createRequire(import.meta.url);
// The same module instance as Prisma's adapter's: one pg in the workspace (pnpm links it to one place).
const { Pool } = require('pg') as typeof pg;

const pools = new Map<pg.Pool, PoolRecord>();

interface RequestWindow {
  started: number;
  finished: number;
  closed: number;
  durations: number[];
  split: Record<Phase, number>;
}
const freshRequests = (): RequestWindow => ({
  started: 0,
  finished: 0,
  closed: 0,
  durations: [],
  split: { holdTransaction: 0, holdQuery: 0, waitTransaction: 0, waitQuery: 0, other: 0 },
});
let requests = freshRequests();

/** The request whose code is running: its checkouts' intervals. */
const current = new AsyncLocalStorage<Interval[]>();

const originalEmit = http.Server.prototype.emit;
http.Server.prototype.emit = function emit(this: http.Server, event: string | symbol, ...args: unknown[]) {
  if (event === 'request') {
    const response = args[1] as http.ServerResponse;
    const counted = requests;
    counted.started += 1;
    const started = performance.now();
    const intervals: Interval[] = [];
    response.once('finish', () => {
      const end = performance.now();
      counted.finished += 1;
      counted.durations.push(end - started);
      splitInto(counted.split, intervals, started, end);
    });
    response.once('close', () => {
      counted.closed += 1;
    });
    return current.run(intervals, () => originalEmit.call(this, event, ...args));
  }
  return originalEmit.call(this, event, ...args);
} as typeof http.Server.prototype.emit;

function freshRecord(pool: pg.Pool): PoolRecord {
  return {
    pool,
    max: (pool.options as { max?: number }).max ?? 10,
    waiting: 0,
    idle: 0,
    total: 0,
    samples: 0,
    waits: { transaction: [], query: [] },
    holds: { transaction: [], query: [] },
    queued: { transaction: 0, query: 0 },
  };
}

/** BENCH_LOAD_POOL_MAX: an experiment's pool size for every pool of the process (pg-pool reads `max` live). */
const POOL_MAX = Number(process.env.BENCH_LOAD_POOL_MAX ?? '');

function recordOf(pool: pg.Pool): PoolRecord {
  let record = pools.get(pool);
  if (!record) {
    if (Number.isSafeInteger(POOL_MAX) && POOL_MAX > 0) (pool.options as { max?: number }).max = POOL_MAX;
    record = freshRecord(pool);
    pools.set(pool, record);
  }
  return record;
}

type Release = (error?: Error | boolean) => void;
type ConnectCallback = (
  error: Error | undefined,
  client: pg.PoolClient | undefined,
  release: Release,
) => void;

const originalConnect = Pool.prototype.connect as (this: pg.Pool, callback?: ConnectCallback) => unknown;

/** A checkout's two phases in the request's split, by its kind: waiting for the connection, then holding it. */
const CHECKOUT_PHASES: Record<CheckoutKind, Record<'wait' | 'hold', Interval['phase']>> = {
  transaction: { wait: 'waitTransaction', hold: 'holdTransaction' },
  query: { wait: 'waitQuery', hold: 'holdQuery' },
};

/**
 * A wait or hold from `from`, open until its `to` is set, added to the asking request's intervals (`undefined`:
 * the checkout came from outside any request, and counts in no request's split).
 */
function openInterval(intervals: Interval[] | undefined, phase: Interval['phase'], from: number): Interval {
  const interval: Interval = { phase, from, to: null };
  intervals?.push(interval);
  return interval;
}

/** Times the hold: wraps the client's `release` (set by the pool on every checkout) once. */
function timeHold(
  record: PoolRecord,
  kind: CheckoutKind,
  client: pg.PoolClient | undefined,
  intervals: Interval[] | undefined,
): void {
  if (!client) return;
  const got = performance.now();
  const hold = openInterval(intervals, CHECKOUT_PHASES[kind].hold, got);
  const release = client.release;
  client.release = (error?: Error | boolean) => {
    client.release = release;
    hold.to = performance.now();
    // The window may have been reset while the connection was out: the hold still counts in the current one.
    recordOf(record.pool).holds[kind].push(performance.now() - got);
    return release.call(client, error);
  };
}

Pool.prototype.connect = function connect(this: pg.Pool, callback?: ConnectCallback) {
  const record = recordOf(this);
  const kind: CheckoutKind = typeof callback === 'function' ? 'query' : 'transaction';
  const queued = this.idleCount === 0 && this.totalCount >= record.max;
  const started = performance.now();
  // The request that asks for the connection (read now: the pool's callback runs in whoever released one).
  const intervals = current.getStore();
  const wait = openInterval(intervals, CHECKOUT_PHASES[kind].wait, started);
  const done = (client: pg.PoolClient | undefined) => {
    const record = recordOf(this);
    wait.to = performance.now();
    record.waits[kind].push(wait.to - started);
    if (queued) record.queued[kind] += 1;
    timeHold(record, kind, client, intervals);
  };
  if (typeof callback === 'function') {
    return originalConnect.call(this, (error, client, release) => {
      if (!error) done(client);
      callback(error, client, client ? client.release : release);
    });
  }
  return (originalConnect.call(this) as Promise<pg.PoolClient>).then((client) => {
    done(client);
    return client;
  });
} as typeof Pool.prototype.connect;

const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();
let windowStart = performance.now();
let utilizationStart: EventLoopUtilization = performance.eventLoopUtilization();

setInterval(() => {
  for (const record of pools.values()) {
    record.waiting += record.pool.waitingCount;
    record.idle += record.pool.idleCount;
    record.total += record.pool.totalCount;
    record.samples += 1;
  }
}, 20).unref();

function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

function checkoutStats(record: PoolRecord, kind: CheckoutKind): CheckoutStats {
  const waits = record.waits[kind];
  const holds = record.holds[kind];
  return {
    count: waits.length,
    queued: record.queued[kind],
    waitSumMs: sum(waits),
    waitP50Ms: quantile(waits, 0.5),
    waitP99Ms: quantile(waits, 0.99),
    waitMaxMs: waits.length === 0 ? Number.NaN : Math.max(...waits),
    holdSumMs: sum(holds),
    holdP50Ms: quantile(holds, 0.5),
    holdP99Ms: quantile(holds, 0.99),
  };
}

function read(): ProbeWindow {
  const ms = (ns: number) => ns / 1e6;
  return {
    seconds: (performance.now() - windowStart) / 1000,
    requests: {
      started: requests.started,
      finished: requests.finished,
      closed: requests.closed,
      sumMs: sum(requests.durations),
      p50Ms: quantile(requests.durations, 0.5),
      p99Ms: quantile(requests.durations, 0.99),
    },
    split: { ...requests.split },
    pools: [...pools.values()].map((record) => ({
      max: record.max,
      meanWaiting: record.waiting / Math.max(1, record.samples),
      meanIdle: record.idle / Math.max(1, record.samples),
      meanTotal: record.total / Math.max(1, record.samples),
      samples: record.samples,
      checkouts: { transaction: checkoutStats(record, 'transaction'), query: checkoutStats(record, 'query') },
    })),
    eventLoop: {
      utilization: performance.eventLoopUtilization(utilizationStart).utilization,
      delayP50Ms: ms(delay.percentile(50)),
      delayP99Ms: ms(delay.percentile(99)),
      delayMaxMs: ms(delay.max),
      delayMeanMs: ms(delay.mean),
    },
  };
}

let profiling: { session: Session; file: string } | null = null;

async function reset(profile: string | undefined): Promise<void> {
  if (profile) {
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    profiling = { session, file: profile };
  }
  for (const [pool] of pools) pools.set(pool, freshRecord(pool));
  // A request started before the reset counts in the old window only.
  requests = freshRequests();
  delay.reset();
  windowStart = performance.now();
  utilizationStart = performance.eventLoopUtilization();
}

process.on('message', (message: ProbeRequest) => {
  if (message?.probe === 'reset') void reset(message.profile);
  else if (message?.probe === 'read') void answerWhenSettled();
});

/** Sends the window once its requests have all closed and the pools are idle, ≤ 5 s. */
async function answerWhenSettled(): Promise<void> {
  const deadline = performance.now() + 5_000;
  // A request the client left still runs to its end (its transaction included): wait for the pools too.
  const busy = () =>
    requests.closed < requests.started ||
    [...pools.keys()].some((pool) => pool.waitingCount > 0 || pool.idleCount < pool.totalCount);
  while (busy() && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  const window = read();
  if (profiling) {
    const { profile } = await profiling.session.post('Profiler.stop');
    writeFileSync(profiling.file, JSON.stringify(profile));
    profiling.session.disconnect();
    profiling = null;
  }
  process.send?.({ probe: 'window', window } satisfies ProbeAnswer);
}
// The channel must not keep the server alive on its own once it is asked to stop.
process.channel?.unref();
