/**
 * The peers section's knobs (environment: BENCH_PEERS_*, BENCH_REDIS_URL) and shared constants. The defaults keep
 * the whole section near 3 minutes on 2 cores; `pnpm bench`'s quick mode passes shorter ones (options.ts).
 */
import { type Env, flagKnob, intKnob, stringKnob } from '../knobs.ts';

export interface PeerSettings {
  /** Rounds; every figure is the median of the per-round figures. At least 5. */
  runs: number;
  /** Seconds per arm per round at 1 connection (p50 latency). */
  p1Seconds: number;
  /** Seconds per arm per round at `p2Connections` (throughput). */
  p2Seconds: number;
  p2Connections: number;
  /** Keys primed then replayed per contender per round, 1 connection. */
  replayKeys: number;
  /** Same-key requests sent at once. */
  burst: number;
  /** Also split every burst across a second process of the same server. */
  twoInstances: boolean;
  /** Postgres pool per server process (`createPrismaClient`'s default, as the app uses it). */
  poolSize: number;
  /** Redis for the Redis-backed peers: a dedicated database index; only `KEY_PREFIX` keys are touched. */
  redisUrl: string;
}

/** The defaults a caller may replace (an explicit variable still wins). */
export type PeerDefaults = Pick<
  PeerSettings,
  'runs' | 'p1Seconds' | 'p2Seconds' | 'replayKeys' | 'twoInstances'
>;

const DEFAULTS: PeerDefaults = { runs: 5, p1Seconds: 1, p2Seconds: 2, replayKeys: 100, twoInstances: true };

export function readPeerSettings(env: Env = process.env, defaults: Partial<PeerDefaults> = {}): PeerSettings {
  const fallback = { ...DEFAULTS, ...defaults };
  return {
    runs: Math.max(5, intKnob(env, 'BENCH_PEERS_RUNS', fallback.runs)),
    p1Seconds: Math.max(1, intKnob(env, 'BENCH_PEERS_P1_SECONDS', fallback.p1Seconds)),
    p2Seconds: Math.max(1, intKnob(env, 'BENCH_PEERS_P2_SECONDS', fallback.p2Seconds)),
    p2Connections: 32,
    replayKeys: Math.max(10, intKnob(env, 'BENCH_PEERS_REPLAY_KEYS', fallback.replayKeys)),
    burst: 50,
    twoInstances: flagKnob(env, 'BENCH_PEERS_TWO_INSTANCES', fallback.twoInstances),
    poolSize: Math.max(1, intKnob(env, 'BENCH_PEERS_POOL', 10)),
    redisUrl: stringKnob(env, 'BENCH_REDIS_URL', 'redis://127.0.0.1:6379/9'),
  };
}

/** Every Redis key the peers write starts with this; the harness deletes exactly these, before and after. */
export const KEY_PREFIX = 'idem-bench:';

/** `bench_effects.n` markers of this section, far from the main harness's (1, 2, 1 000 000 + run). */
export const MARKER_BASE = 2_000_000;
