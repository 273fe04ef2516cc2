/**
 * The peers section's knobs (environment) and shared constants. Defaults keep the whole section near 3 minutes
 * on 2 cores; the lead's quiet-machine rerun may raise them.
 */

export function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number.parseInt(raw, 10);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer`);
  return value;
}

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

export function peerSettingsFromEnv(): PeerSettings {
  return {
    runs: Math.max(5, intEnv('BENCH_PEERS_RUNS', 5)),
    p1Seconds: Math.max(1, intEnv('BENCH_PEERS_P1_SECONDS', 1)),
    p2Seconds: Math.max(1, intEnv('BENCH_PEERS_P2_SECONDS', 2)),
    p2Connections: 32,
    replayKeys: Math.max(10, intEnv('BENCH_PEERS_REPLAY_KEYS', 100)),
    burst: 50,
    twoInstances: process.env.BENCH_PEERS_TWO_INSTANCES !== '0',
    poolSize: Math.max(1, intEnv('BENCH_PEERS_POOL', 10)),
    redisUrl: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379/9',
  };
}

/** Every Redis key the peers write starts with this; the harness deletes exactly these, before and after. */
export const KEY_PREFIX = 'idem-bench:';

/** `bench_effects.n` markers of this section, far from the main harness's (1, 2, 1 000 000 + run). */
export const MARKER_BASE = 2_000_000;
