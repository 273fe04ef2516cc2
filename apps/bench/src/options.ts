/**
 * `pnpm bench`'s knobs, parsed once into a frozen object before anything starts. Every knob is an environment
 * variable; unset or empty takes the default, which BENCH_QUICK=1 shortens (the quick defaults are here, not
 * written back into the environment). An explicit variable always wins over either default.
 */
import { type Env, flagKnob, intKnob, stringKnob } from './knobs.ts';
import { type PeerDefaults, type PeerSettings, readPeerSettings } from './peers/config.ts';
import { readStorageSettings, type StorageDefaults, type StorageSettings } from './storage/settings.ts';

export interface BenchOptions {
  /** DATABASE_URL (postgresql://postgres@127.0.0.1:5432): the Postgres server the scratch database is created on. */
  readonly postgresUrl: string;
  /** BENCH_QUICK=1: every section at its shortest, for development (the figures are noisier, not comparable). */
  readonly quick: boolean;
  /**
   * BENCH_RUNS (5, at least 5): runs of the main section, the checkout section and the pgbench floor; each
   * figure is the median of the per-run figures.
   */
  readonly runs: number;
  /** BENCH_P1_SECONDS (3; quick 1): P1, per procedure per run, 1 connection. */
  readonly p1Seconds: number;
  /** BENCH_P2_SECONDS (5; quick 1): P2, per procedure per run, at `p2Connections`. */
  readonly p2Seconds: number;
  readonly p2Connections: number;
  /** BENCH_P3_KEYS (200; quick 40): keys primed, then replayed, per run. */
  readonly p3Keys: number;
  /** Same-key requests sent at once (P5). */
  readonly p5Burst: number;
  /** BENCH_PGBENCH_SECONDS (4; quick 1; 0 skips the pgbench floor): per pgbench run. */
  readonly pgbenchSeconds: number;
  /** P2 against connections: protected and unprotected at each count. */
  readonly curveConnections: readonly number[];
  /** BENCH_CURVE_ROUNDS (3; quick 1): rounds per connection count, the order alternating. */
  readonly curveRounds: number;
  /** BENCH_CURVE_SECONDS (3; quick 1): per procedure per round. */
  readonly curveSeconds: number;
  /** BENCH_ORDER_SECONDS (3; quick 1): `checkout.placeOrder` with and without the layer, per run. */
  readonly orderSeconds: number;
  /** BENCH_JOBS (200; quick 30): fulfilment jobs per arm of the worker's job dedupe, at most (one paid order each). */
  readonly jobs: number;
  /** BENCH_VERBOSE=1: forward the servers' output. */
  readonly verbose: boolean;
  /** The peers section (BENCH_PEERS_*, BENCH_REDIS_URL: peers/config.ts); null with BENCH_PEERS=0. */
  readonly peers: Readonly<PeerSettings> | null;
  /**
   * The storage section (BENCH_STORAGE_SECTIONS, BENCH_P6_*, BENCH_GROWTH_*, …: storage/settings.ts), run last;
   * null with BENCH_STORAGE=0, which keeps the figures the last storage run left in docs/bench-results.json.
   */
  readonly storage: Readonly<StorageSettings> | null;
}

/** The peers' defaults in quick mode; the rest are the section's own. */
const QUICK_PEERS: Partial<PeerDefaults> = {
  p1Seconds: 1,
  p2Seconds: 1,
  replayKeys: 20,
  twoInstances: false,
};

/**
 * `pnpm bench` runs P6 and the growth series; the partitioned-expiry experiment stays in `pnpm bench:storage`.
 * Quick mode loads a tenth of the rows and grows the table to 10 k keys only.
 */
const STORAGE: Partial<StorageDefaults> = { sections: ['p6', 'growth'] };
const QUICK_STORAGE: Partial<StorageDefaults> = {
  ...STORAGE,
  p6Rows: 100_000,
  p6LiveRows: 20_000,
  p6BaselineSeconds: 2,
  scopes: 10_000,
  growthRows: [10_000],
  growthSamples: 200,
};

export function parseBenchOptions(env: Env = process.env): BenchOptions {
  const quick = flagKnob(env, 'BENCH_QUICK', false);
  const count = (name: string, normal: number, quickDefault: number) =>
    intKnob(env, name, quick ? quickDefault : normal);
  // Both are read (and so checked) whether or not their section runs.
  const peers = readPeerSettings(env, quick ? QUICK_PEERS : {});
  const storage = readStorageSettings(env, quick ? QUICK_STORAGE : STORAGE);
  return Object.freeze({
    postgresUrl: stringKnob(env, 'DATABASE_URL', 'postgresql://postgres@127.0.0.1:5432'),
    quick,
    runs: Math.max(5, count('BENCH_RUNS', 5, 5)),
    p1Seconds: count('BENCH_P1_SECONDS', 3, 1),
    p2Seconds: count('BENCH_P2_SECONDS', 5, 1),
    p2Connections: 32,
    p3Keys: count('BENCH_P3_KEYS', 200, 40),
    p5Burst: 50,
    pgbenchSeconds: count('BENCH_PGBENCH_SECONDS', 4, 1),
    curveConnections: Object.freeze([1, 8, 32, 128]),
    curveRounds: count('BENCH_CURVE_ROUNDS', 3, 1),
    curveSeconds: count('BENCH_CURVE_SECONDS', 3, 1),
    orderSeconds: count('BENCH_ORDER_SECONDS', 3, 1),
    jobs: count('BENCH_JOBS', 200, 30),
    verbose: flagKnob(env, 'BENCH_VERBOSE', false),
    peers: flagKnob(env, 'BENCH_PEERS', true) ? Object.freeze(peers) : null,
    storage: flagKnob(env, 'BENCH_STORAGE', true) ? Object.freeze(storage) : null,
  });
}
