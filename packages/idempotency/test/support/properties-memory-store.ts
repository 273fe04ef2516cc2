/**
 * An in-memory `IdempotencyStore` that models the Postgres store (src/prisma/store.ts) statement by statement,
 * for property tests that need thousands of interleavings:
 *
 * - `claim` is ONE atomic step: insert, or take over a row that expired (and has no live lease) or whose lease
 *   ended while still processing the same fingerprint — the `ON CONFLICT … DO UPDATE … WHERE` of the real store.
 * - `complete` is fenced (`lease_owner = owner and state = 'processing'`), `release` is owner-checked.
 * - Times come from an injectable clock (the database's `now()`), so a test can expire leases and keys.
 * - Transactions model row locks: a claim/complete inside a transaction locks the key until commit or rollback;
 *   a concurrent writer waits for it (a transaction's wait is bounded by an injectable "lock timeout" event,
 *   like `SET LOCAL lock_timeout`), then sees the committed row, as `INSERT … ON CONFLICT` does. Reads (`find`)
 *   never wait and see committed rows only (MVCC). `deleteExpiredBatch` skips locked rows (SKIP LOCKED).
 * - `claim` reads a committed live row without waiting for any lock (the real claim's MVCC read); only an
 *   insert or takeover takes the row lock. A claim with a `response` inserts the row already completed.
 * - `recordEffect(label, tx)` is the procedure's own database write: it commits or rolls back with `tx`.
 */
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecord,
  IdempotencyStore,
  RecordKey,
  StoredResponse,
  TransactionOptions,
} from '../../src/index.ts';

/** The database clock. Starts at a fixed instant; only `advance` moves it. */
export class ManualClock {
  private current = Date.UTC(2026, 0, 1);
  now(): number {
    return this.current;
  }
  advance(seconds: number): void {
    this.current += seconds * 1000;
  }
}

interface Row {
  scope: string;
  procedure: string;
  key: string;
  fingerprint: string;
  state: 'processing' | 'completed';
  response: StoredResponse | null;
  leaseOwner: string | null;
  lockedUntil: number | null;
  createdAt: number;
  expiresAt: number;
  replayCount: number;
}

export interface MemoryTx {
  readonly id: number;
  /** Uncommitted row versions (null: deleted) and procedure writes. */
  writes: Map<string, Row | null>;
  effects: string[];
  open: boolean;
}

/** What the database raises when a lock wait exceeds `lock_timeout` (SQLSTATE 55P03). */
export class MemoryLockTimeout extends Error {
  readonly code = '55P03';
  constructor() {
    super('canceling statement due to lock timeout');
  }
}

export interface MemoryStoreOptions {
  clock?: ManualClock;
  /**
   * Called when a statement inside a transaction must wait for a row lock; when the returned promise resolves
   * before the lock is free, the statement fails with `MemoryLockTimeout`. Default: wait forever.
   */
  lockTimeout?: (key: RecordKey) => Promise<unknown>;
}

export interface MemoryStore extends IdempotencyStore<MemoryTx> {
  readonly clock: ManualClock;
  /** The procedure's own write: committed with `tx` (or at once without one). */
  recordEffect(label: string, tx?: MemoryTx): void;
  /** Committed procedure writes. */
  committedEffects(): readonly string[];
  /** All committed rows (for assertions). */
  rows(): IdempotencyRecord[];
  /** Test-only: a blind upsert, for building a deliberately broken (check-then-write) store. */
  unsafeOverwrite(request: ClaimRequest): void;
}

const id = (key: RecordKey) => JSON.stringify([key.scope, key.procedure, key.key]);

export function createMemoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const clock = options.clock ?? new ManualClock();
  const committed = new Map<string, Row>();
  const effects: string[] = [];
  const locks = new Map<string, MemoryTx>();
  const lockWaiters = new Map<string, Array<() => void>>();
  let nextTx = 1;

  const now = () => clock.now();

  function toRecord(row: Row): IdempotencyRecord {
    return {
      scope: row.scope,
      procedure: row.procedure,
      key: row.key,
      fingerprint: row.fingerprint,
      state: row.state,
      // A copy, as a fresh `JSON.parse` of the stored text would be.
      response: row.response === null ? null : (JSON.parse(JSON.stringify(row.response)) as StoredResponse),
      leaseOwner: row.leaseOwner,
      leaseActive: row.lockedUntil !== null && row.lockedUntil > now(),
      createdAt: new Date(row.createdAt),
      expiresAt: new Date(row.expiresAt),
      replayCount: row.replayCount,
    };
  }

  /** The row as `tx` sees it: its own uncommitted version, else the committed one. */
  function visible(key: string, tx?: MemoryTx): Row | undefined {
    if (tx?.writes.has(key)) return tx.writes.get(key) ?? undefined;
    return committed.get(key);
  }

  function write(key: string, row: Row | null, tx?: MemoryTx) {
    if (tx) tx.writes.set(key, row);
    else if (row) committed.set(key, row);
    else committed.delete(key);
  }

  /** Takes the row lock of `key` for `tx` (held to its end), or waits for a transaction that holds it. */
  async function lock(key: string, recordKey: RecordKey, tx?: MemoryTx): Promise<void> {
    let timedOut = false;
    let timeout: Promise<void> | null = null;
    for (;;) {
      const holder = locks.get(key);
      if (!holder || holder === tx) break;
      if (timedOut) throw new MemoryLockTimeout();
      const released = new Promise<void>((resolve) => {
        const waiters = lockWaiters.get(key) ?? [];
        waiters.push(resolve);
        lockWaiters.set(key, waiters);
      });
      if (tx && options.lockTimeout && !timeout)
        timeout = options.lockTimeout(recordKey).then(() => {
          timedOut = true;
        });
      await (timeout ? Promise.race([released, timeout]) : released);
      if (timedOut && locks.get(key) && locks.get(key) !== tx) throw new MemoryLockTimeout();
    }
    if (tx) locks.set(key, tx);
  }

  function unlockAll(tx: MemoryTx) {
    for (const [key, holder] of locks) {
      if (holder !== tx) continue;
      locks.delete(key);
      const waiters = lockWaiters.get(key) ?? [];
      lockWaiters.delete(key);
      for (const wake of waiters) wake();
    }
  }

  /** The ON CONFLICT … DO UPDATE … WHERE condition of the real claim. */
  function claimable(row: Row, request: ClaimRequest): boolean {
    const t = now();
    const liveLease = row.state === 'processing' && row.lockedUntil !== null && row.lockedUntil > t;
    const expired = row.expiresAt <= t && !liveLease;
    const deadLeaseSameRequest =
      row.state === 'processing' &&
      row.lockedUntil !== null &&
      row.lockedUntil <= t &&
      row.fingerprint === request.fingerprint;
    return expired || deadLeaseSameRequest;
  }

  function freshRow(request: ClaimRequest, replayCount: number): Row {
    const t = now();
    const response = request.response ?? null;
    return {
      scope: request.scope,
      procedure: request.procedure,
      key: request.key,
      fingerprint: request.fingerprint,
      state: response ? 'completed' : 'processing',
      response,
      leaseOwner: response ? null : request.owner,
      lockedUntil: response ? null : t + request.leaseSeconds * 1000,
      createdAt: t,
      expiresAt: t + request.retentionSeconds * 1000,
      replayCount,
    };
  }

  const store: MemoryStore = {
    clock,

    async claim(request, tx) {
      const key = id(request);
      // The statement's snapshot: a live committed row is answered at once, without waiting for its lock.
      const seen = visible(key, tx);
      if (seen && !claimable(seen, request)) return { claimed: false, record: toRecord(seen) };
      await lock(key, request, tx);
      // From here on, one atomic statement: no await until it returns.
      const row = visible(key, tx);
      if (!row) {
        write(key, freshRow(request, 0), tx);
        return { claimed: true, takeover: false } satisfies ClaimResult;
      }
      if (claimable(row, request)) {
        write(key, freshRow(request, row.expiresAt <= now() ? 0 : row.replayCount), tx);
        return { claimed: true, takeover: true };
      }
      return { claimed: false, record: toRecord(row) };
    },

    async complete(recordKey, owner, response, tx) {
      const key = id(recordKey);
      await lock(key, recordKey, tx);
      const row = visible(key, tx);
      if (!row || row.leaseOwner !== owner || row.state !== 'processing') return false;
      write(key, { ...row, state: 'completed', response, leaseOwner: null, lockedUntil: null }, tx);
      return true;
    },

    async release(recordKey, owner) {
      const key = id(recordKey);
      await lock(key, recordKey);
      const row = committed.get(key);
      if (!row || row.leaseOwner !== owner || row.state !== 'processing') return false;
      committed.delete(key);
      return true;
    },

    async find(recordKey) {
      const row = committed.get(id(recordKey));
      return row ? toRecord(row) : null;
    },

    async countReplay(recordKey, replays) {
      const key = id(recordKey);
      await lock(key, recordKey);
      const row = committed.get(key);
      if (row) committed.set(key, { ...row, replayCount: row.replayCount + replays });
    },

    async transaction<T>(fn: (tx: MemoryTx) => Promise<T>, _options: TransactionOptions): Promise<T> {
      const tx: MemoryTx = { id: nextTx++, writes: new Map(), effects: [], open: true };
      try {
        const result = await fn(tx);
        for (const [key, row] of tx.writes) {
          if (row) committed.set(key, row);
          else committed.delete(key);
        }
        effects.push(...tx.effects);
        return result;
      } finally {
        tx.open = false;
        unlockAll(tx);
      }
    },

    isLockTimeout: (error) => error instanceof MemoryLockTimeout,

    async deleteExpiredBatch(batchSize) {
      const t = now();
      let deleted = 0;
      for (const [key, row] of [...committed]) {
        if (deleted >= batchSize) break;
        if (locks.has(key)) continue; // FOR UPDATE SKIP LOCKED
        const liveLease = row.state === 'processing' && row.lockedUntil !== null && row.lockedUntil > t;
        if (row.expiresAt <= t && !liveLease) {
          committed.delete(key);
          deleted += 1;
        }
      }
      return deleted;
    },

    recordEffect(label, tx) {
      if (tx) {
        if (!tx.open) throw new Error('write through a finished transaction');
        tx.effects.push(label);
      } else effects.push(label);
    },

    committedEffects: () => effects,

    rows: () => [...committed.values()].map(toRecord),

    unsafeOverwrite(request) {
      committed.set(id(request), freshRow(request, 0));
    },
  };
  return store;
}

/**
 * CONTROL: the bug the README forbids. `claim` reads, then (after `gap`, where another request can run) writes
 * blindly. Two requests can both read "no row" and both believe they own the key.
 */
export function createCheckThenWriteStore(
  inner: MemoryStore,
  gap: () => Promise<unknown>,
): IdempotencyStore<MemoryTx> {
  return {
    ...inner,
    async claim(request) {
      const existing = await inner.find(request);
      const free =
        !existing ||
        (existing.expiresAt.getTime() <= inner.clock.now() && !existing.leaseActive) ||
        (existing.state === 'processing' &&
          !existing.leaseActive &&
          existing.fingerprint === request.fingerprint);
      if (!free) return { claimed: false, record: existing };
      await gap();
      inner.unsafeOverwrite(request);
      return { claimed: true, takeover: existing !== null };
    },
  };
}
