/**
 * The operations the growth and P6 figures time, through the REAL store (`createPrismaIdempotencyStore` on a
 * Prisma client from `@idem/db`), one connection, one operation at a time — what one request of the app pays.
 *
 * A claim is the external-mode claim as the handler issues it (its own statement, autocommit, default lease,
 * retention and per-principal in-flight cap); each claimed key is then completed with a stored response, as a
 * request would, so the probe never piles up keys "in flight" and the rows it adds look like the loaded ones.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { DEFAULT_OPTIONS, type IdempotencyStore, type RecordKey } from '@idem/idempotency';
import type { TimedSample } from './latency.ts';

/** The default per-principal cap (maxInFlightPerScope 20): the claim statement the app runs by default. */
export const DEFAULT_CAP = {
  max: DEFAULT_OPTIONS.maxInFlightPerScope,
  retryAfterSeconds: DEFAULT_OPTIONS.retryAfterSeconds,
};

export type Store = IdempotencyStore<unknown>;

export interface ClaimTarget {
  scope: string;
  procedure: string;
  /** Absent: a fresh random key (a first execution). */
  key?: string;
  /** Absent: the default cap; null: no cap (maxInFlightPerScope: Infinity). */
  cap?: typeof DEFAULT_CAP | null;
}

const RESPONSE_BODY = JSON.stringify({ json: { orderId: randomUUID(), status: 'paid', totalCents: 4599 } });

/**
 * Claims one key and, when this call claimed it, completes it. Returns the claim's latency, the completion's
 * (NaN when nothing was claimed) and whether it claimed (a replay of an existing key does not).
 */
export async function claimAndComplete(
  store: Store,
  target: ClaimTarget,
): Promise<{ ms: number; completeMs: number; claimed: boolean }> {
  const key: RecordKey = {
    scope: target.scope,
    procedure: target.procedure,
    key: target.key ?? randomUUID(),
  };
  const owner = randomUUID();
  const started = performance.now();
  const result = await store.claim({
    ...key,
    fingerprint: '0'.repeat(64),
    owner,
    leaseSeconds: DEFAULT_OPTIONS.leaseSeconds,
    retentionSeconds: DEFAULT_OPTIONS.retentionSeconds,
    inFlightCap: target.cap === null ? undefined : (target.cap ?? DEFAULT_CAP),
  });
  const ms = performance.now() - started;
  if (!result.claimed) return { ms, completeMs: Number.NaN, claimed: false };
  const completing = performance.now();
  await store.complete(key, owner, { kind: 'output', httpStatus: 200, body: RESPONSE_BODY });
  return { ms, completeMs: performance.now() - completing, claimed: true };
}

export interface ClaimLoop {
  samples: TimedSample[];
  errors: string[];
  /** Stops after the claim in progress and resolves when the loop has ended. */
  stop(): Promise<void>;
}

/**
 * Claims (and completes) fresh keys back to back until stopped, stamping every claim with its start time so
 * the caller can cut the samples into windows (baseline, during cleanup, …). Failures go to `errors`.
 */
export function startClaimLoop(claim: () => Promise<number>): ClaimLoop {
  const samples: TimedSample[] = [];
  const errors: string[] = [];
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const at = performance.now();
      try {
        samples.push({ at, ms: await claim() });
      } catch (error) {
        // A failed claim is reported, never averaged into the latencies.
        errors.push(
          error instanceof Error ? (error.message.split('\n').at(-1) ?? error.message) : String(error),
        );
      }
    }
  })();
  return {
    samples,
    errors,
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}
