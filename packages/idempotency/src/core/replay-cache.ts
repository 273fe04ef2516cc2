/**
 * Replays from memory (opt-in: `replayCache: createReplayCache()` in the options). A completed key's record
 * never changes until it expires or an operator evicts it, so a process that has read it once may answer the
 * next duplicates without the database: same scope, procedure, key AND fingerprint, and only until the earlier
 * of its own time to live and the row's expiry. Never a first execution: only a record the database returned as
 * completed is remembered, or (`rememberCommitted`) the response this process itself committed, after its COMMIT. Another payload, another principal, an unknown or expired key go to the database as
 * before (a 422, an execution).
 *
 * An eviction elsewhere must reach every process's cache: `forget(key)` (the Postgres store's evictions notify
 * `idem_key_evicted`; `forgetEvictedKeys` in `./prisma` listens). Until a process hears of it, it may still
 * replay the evicted answer; `ttlSeconds` bounds that, and a lost listener connection clears the whole cache.
 */
import type { ResolvedOptions } from './config.ts';
import {
  type IdempotencyRecord,
  type RecordKey,
  RecordState,
  recordKeyId,
  type StoredResponse,
} from './record.ts';
import { countReplay } from './replay-counts.ts';
import type { IdempotentRequest } from './request.ts';
import type { IdempotencyStore } from './store.ts';

export interface ReplayCacheOptions {
  /** Completed keys held at most; the least recently replayed goes first. Default 10 000. */
  maxEntries?: number;
  /**
   * Bytes of stored responses held at most (their JSON text's length): one client replaying large answers
   * cannot make the process hold more. A response larger than a tenth of it is not held. Default 32 MiB.
   */
  maxBytes?: number;
  /** How long a key is answered from memory after it was read. Default 60 s. */
  ttlSeconds?: number;
  /**
   * Stops answering this long before the row's own expiry, so that the database's clock (which decides when a
   * key may be claimed again) and this process's may differ by up to that much. Default 5 s.
   */
  expiryMarginSeconds?: number;
  /**
   * Also remember the response this process has just committed for a key (its own execution's, after the
   * COMMIT), so that even the key's first duplicate is answered from memory when it reaches this process.
   * Default false: only a completed record read back from the database is remembered.
   */
  rememberCommitted?: boolean;
  /** The clock, in ms since the epoch (tests move it). Default `Date.now`. */
  now?: () => number;
}

export interface ReplayCache {
  /** The stored response for `request`, if a completed record with its fingerprint is remembered and fresh. */
  replay(request: IdempotentRequest): StoredResponse | undefined;
  /** Remembers the record the database returned for `request`; anything but a completed one is ignored. */
  remember(request: IdempotentRequest, record: IdempotencyRecord): void;
  /**
   * Told of the response this process has just committed for `request`, whose row expires at `expiresAt` at the
   * earliest (this process's clock); remembered only with `rememberCommitted: true`.
   */
  rememberCommitted?(request: IdempotentRequest, response: StoredResponse, expiresAt: Date): void;
  /** Drops one key (it was evicted). */
  forget(key: RecordKey): void;
  /** Drops every key (eviction notices may have been missed). */
  clear(): void;
  readonly size: number;
}

interface Entry {
  fingerprint: string;
  response: StoredResponse;
  until: number;
  bytes: number;
}

export function createReplayCache(options: ReplayCacheOptions = {}): ReplayCache {
  const maxEntries = options.maxEntries ?? 10_000;
  const maxBytes = options.maxBytes ?? 32 * 1024 * 1024;
  const ttlMs = (options.ttlSeconds ?? 60) * 1000;
  const marginMs = (options.expiryMarginSeconds ?? 5) * 1000;
  const now = options.now ?? Date.now;
  if (!Number.isInteger(maxEntries) || maxEntries < 1)
    throw new RangeError(`replay cache: maxEntries must be a whole number ≥ 1, got ${maxEntries}`);
  if (!(ttlMs > 0 && Number.isFinite(ttlMs)))
    throw new RangeError(`replay cache: ttlSeconds must be positive and finite, got ${options.ttlSeconds}`);
  if (!(marginMs >= 0)) throw new RangeError('replay cache: expiryMarginSeconds must be ≥ 0');
  if (!(maxBytes > 0)) throw new RangeError(`replay cache: maxBytes must be positive, got ${maxBytes}`);
  // A Map keeps insertion order: re-inserting on every hit makes its first key the least recently used.
  const entries = new Map<string, Entry>();
  let bytes = 0;
  const drop = (id: string) => {
    const entry = entries.get(id);
    if (!entry) return;
    entries.delete(id);
    bytes -= entry.bytes;
  };

  const cache: ReplayCache = {
    replay(request) {
      const id = recordKeyId(request);
      const entry = entries.get(id);
      if (!entry) return undefined;
      if (entry.until <= now()) {
        drop(id);
        return undefined;
      }
      if (entry.fingerprint !== request.fingerprint) return undefined;
      entries.delete(id);
      entries.set(id, entry);
      // A copy: what an adapter does with its answer never reaches the next duplicate's.
      return structuredClone(entry.response);
    },
    remember(request, record) {
      if (record.state !== RecordState.completed || !record.response) return;
      if (record.fingerprint !== request.fingerprint) return;
      // An expiry past what a Date holds (a retention of millennia, estimated by rememberCommitted) is no bound.
      const rowEnds = record.expiresAt.getTime();
      const until = Math.min(
        now() + ttlMs,
        Number.isNaN(rowEnds) ? Number.POSITIVE_INFINITY : rowEnds - marginMs,
      );
      if (until <= now()) return;
      const size = JSON.stringify(record.response).length;
      if (size > maxBytes / 10) return;
      const id = recordKeyId(request);
      drop(id);
      entries.set(id, {
        fingerprint: record.fingerprint,
        response: structuredClone(record.response),
        until,
        bytes: size,
      });
      bytes += size;
      while (entries.size > maxEntries || bytes > maxBytes) {
        const oldest = entries.keys().next().value;
        if (oldest === undefined) break;
        drop(oldest);
      }
    },
    rememberCommitted(request, response, expiresAt) {
      if (!options.rememberCommitted) return;
      cache.remember(request, {
        ...request,
        state: RecordState.completed,
        // As the database holds it (JSON text): what a replay read back from there would get.
        response: JSON.parse(JSON.stringify(response)) as StoredResponse,
        leaseOwner: null,
        leaseActive: false,
        createdAt: new Date(now()),
        expiresAt,
        replayCount: 0,
      });
    },
    forget(key) {
      drop(recordKeyId(key));
    },
    clear() {
      entries.clear();
      bytes = 0;
    },
    get size() {
      return entries.size;
    },
  };
  return cache;
}

/** A duplicate answered from the options' replay cache (its replay counted), or undefined: ask the database. */
export function replayFromMemory(
  store: Pick<IdempotencyStore<unknown>, 'countReplay'>,
  options: ResolvedOptions,
  request: IdempotentRequest,
): StoredResponse | undefined {
  const response = options.replayCache?.replay(request);
  if (response) countReplay(store, request);
  return response;
}
