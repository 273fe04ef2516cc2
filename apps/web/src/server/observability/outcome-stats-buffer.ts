/**
 * Counts idempotent request outcomes per (minute, procedure, outcome) in memory and hands them to a writer
 * every few seconds. `record` is a Map increment: the request path never waits on the database for the
 * dashboard. The writer adds the counts to `idempotency_stats`, so several server processes sum up there.
 */

export interface OutcomeCount {
  /** Start of the minute, UTC. */
  bucket: Date;
  procedure: string;
  outcome: string;
  count: number;
}

export type OutcomeCountWriter = (counts: OutcomeCount[]) => Promise<void>;

export interface OutcomeStatsBufferOptions {
  write: OutcomeCountWriter;
  /** How often the background flush runs. */
  intervalMs: number;
  /** Told about a failed background flush (its counts are kept for the next one). */
  onError?: (error: unknown) => void;
  /**
   * Most (minute, procedure, outcome) entries held while the database is unreachable; past it the oldest
   * minutes are dropped (and counted in `dropped`) rather than letting memory grow without bound.
   */
  maxPending?: number;
  now?: () => number;
}

export interface OutcomeStatsBuffer {
  record(procedure: string, outcome: string): void;
  /** Writes what is pending now (waits for a flush already running first). Resolves to the rows written. */
  flush(): Promise<number>;
  /** Entries waiting for the next flush. */
  readonly pending: number;
  /** Counts given up because `maxPending` was reached. */
  readonly dropped: number;
  /** Stops the timer (tests, shutdown). Pending counts stay until `flush()`. */
  stop(): void;
}

const MINUTE_MS = 60_000;

export function createOutcomeStatsBuffer(options: OutcomeStatsBufferOptions): OutcomeStatsBuffer {
  const now = options.now ?? Date.now;
  const maxPending = options.maxPending ?? 10_000;
  let counts = new Map<string, OutcomeCount>();
  let dropped = 0;
  let timer: ReturnType<typeof setInterval> | undefined;
  let running: Promise<number> | undefined;

  function add(into: Map<string, OutcomeCount>, entry: OutcomeCount) {
    const id = `${entry.bucket.getTime()}\u0000${entry.procedure}\u0000${entry.outcome}`;
    const existing = into.get(id);
    if (existing) existing.count += entry.count;
    else into.set(id, { ...entry });
  }

  function trim() {
    if (counts.size <= maxPending) return;
    const oldestFirst = [...counts.entries()].sort(([, a], [, b]) => a.bucket.getTime() - b.bucket.getTime());
    for (const [id, entry] of oldestFirst.slice(0, counts.size - maxPending)) {
      dropped += entry.count;
      counts.delete(id);
    }
  }

  async function writePending(): Promise<number> {
    if (counts.size === 0) return 0;
    const batch = counts;
    counts = new Map();
    // A stable order: two processes upserting the same rows lock them in the same order (no deadlock).
    const rows = [...batch.values()].sort(
      (a, b) =>
        a.bucket.getTime() - b.bucket.getTime() ||
        a.procedure.localeCompare(b.procedure) ||
        a.outcome.localeCompare(b.outcome),
    );
    try {
      await options.write(rows);
      return rows.length;
    } catch (error) {
      // Keep the counts (plus whatever arrived meanwhile) for the next attempt.
      for (const row of rows) add(counts, row);
      trim();
      throw error;
    }
  }

  // Flushes run one after another: a slow write never overlaps the next one.
  function flush(): Promise<number> {
    const next = (running ?? Promise.resolve(0)).then(writePending);
    const settled = next.catch(() => 0);
    running = settled;
    void settled.then(() => {
      if (running === settled) running = undefined;
    });
    return next;
  }

  function startTimer() {
    timer = setInterval(() => {
      flush().catch((error: unknown) => options.onError?.(error));
    }, options.intervalMs);
    // The timer alone must not keep a process (or a test run) alive.
    timer.unref?.();
  }

  return {
    record(procedure, outcome) {
      const bucket = new Date(Math.floor(now() / MINUTE_MS) * MINUTE_MS);
      add(counts, { bucket, procedure, outcome, count: 1 });
      if (counts.size > maxPending) trim();
      if (!timer) startTimer();
    },
    flush,
    get pending() {
      return counts.size;
    },
    get dropped() {
      return dropped;
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}
