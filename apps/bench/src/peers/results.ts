/** The shape of the peers section's results: per round, per arm, per variant (docs/bench-results.json `peers`). */
import type { PeerSettings } from './config.ts';
import type { ArmId, VariantId } from './contenders.ts';

export interface BurstOutcome {
  /** `bench_effects` rows the burst wrote: the handler's executions. */
  executions: number;
  statuses: Record<string, number>;
  wallMs: number;
}

/** CPU milliseconds per request of one timed throughput window, by process role. */
export interface CpuPerRequest {
  /** The arm's server process. */
  server: number;
  /** The Postgres backends of the bench's database (every server's pool). */
  postgres: number;
  /** The Redis server (the Redis peers' store; idle for the others). */
  redis: number;
}

export interface RoundResult {
  p1Ms: Record<ArmId, number>;
  p2Rps: Record<ArmId, number>;
  /** CPU per request during each arm's throughput window (the same window as `p2Rps`). */
  p2CpuMs: Partial<Record<ArmId, CpuPerRequest>>;
  replay: Partial<Record<ArmId, { firstP50: number; replayP50: number; rowsWritten: number }>>;
  bursts: Partial<Record<VariantId, { oneInstance: BurstOutcome; twoInstances?: BurstOutcome }>>;
  /** Non-2xx answers and connection errors during the timed parts, per arm. */
  failures: Partial<Record<ArmId, number>>;
}

export interface ProbeAnswer {
  status: number | 'error';
  body: string;
}

export interface Probe {
  first: ProbeAnswer;
  /** The same key and the same payload again, after the first completed. */
  identicalRetry: ProbeAnswer & { sameBodyAsFirst: boolean; rowsWritten: number };
  /** The same key, a different payload. `rowsWritten`: did the new payload run? */
  mismatchedPayload: ProbeAnswer & { sameBodyAsFirst: boolean; rowsWritten: number };
}

export interface ArmSummary {
  id: ArmId;
  label: string;
  store: string;
  baseline: ArmId | null;
  p1Ms: number;
  p2Rps: number;
  /** Protected arms only: median of the per-round ratios against the own-framework baseline and `none`. */
  p1Ratio?: number;
  p1RatioVsNone?: number;
  p2Ratio?: number;
  p2RatioVsNone?: number;
  firstP50?: number;
  replayP50?: number;
  replayRatio?: number;
  replayRows?: number;
  failures: number;
}

export interface VariantSummary {
  id: VariantId;
  label: string;
  oneInstance: { executionsPerRun: number[]; statusesPerRun: Array<Record<string, number>> };
  twoInstances?: { executionsPerRun: number[]; statusesPerRun: Array<Record<string, number>> };
  probe: Probe;
}

/** What `pnpm bench` records when the section did not run (BENCH_PEERS=0, no Redis, a server failed). */
export interface PeersSkipped {
  skipped: string;
}

export interface PeersResult {
  date: string;
  machine: { cpus: number; node: string; postgres: string; redis: string; platform: string };
  versions: Record<string, string>;
  settings: PeerSettings;
  arms: ArmSummary[];
  variants: VariantSummary[];
  rounds: RoundResult[];
  seconds: number;
}
