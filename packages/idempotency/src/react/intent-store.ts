/**
 * The persisted state of one intent: its key and, while an attempt may be in flight, the payload it
 * was sent with. One record per intent in the storage the hook is given (`idem:intent:<intentId>`; default
 * sessionStorage: per tab; localStorage: shared by the tabs), so a reload, the back button
 * or a resubmit finds the same key. Shared by every hook instance of the same (storage, intent), with change
 * notifications for `useSyncExternalStore` — also for writes by other tabs (the `storage` event).
 *
 * A tab waiting for an attempt's outcome keeps its sign of life under a name of its own,
 * `idem:alive:<intentId>:<key>`, never in the record: a tab's storage is its own copy, which takes the other
 * tabs' writes only when their messages arrive, so a refresh that rewrote the record could write, from a copy
 * not yet up to date, an older intent back over a newer one. A mark is named after its key, so a late refresh of
 * an old key's mark says nothing about the record's current key, and overwrites no other key's mark.
 */

import { createIdempotencyKey } from '../client/key.ts';
import { isValidIdempotencyKey } from '../protocol.ts';

/** The part of the Web Storage API used (window.sessionStorage fits). */
export type KeyValueStorage = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;

export interface SentAttempt {
  /** The payload, serialized. */
  payload: string;
  /** When the attempt was sent (ms since the epoch). */
  at: number;
  /**
   * A sign of life kept inside the record (ms since the epoch), as a tab running a version of this library
   * without the separate mark refreshes it. Read, never written: a payment such a tab has in flight while the
   * others have the new version (a deploy) still shows as in flight, not in doubt.
   */
  alive?: number;
}

/** How often a tab waiting for an outcome refreshes its sign of life. */
export const ALIVE_INTERVAL_MS = 2_000;
/** After this long without a sign of life, the sending tab is taken as gone and the attempt as in doubt. */
export const ALIVE_STALE_MS = 4 * ALIVE_INTERVAL_MS;

/** True while a tab whose last sign of life was at `aliveAt` (ms; null: none) is taken as still waiting. */
export const isAlive = (aliveAt: number | null | undefined, now = Date.now()): boolean =>
  now - (aliveAt ?? -Infinity) < ALIVE_STALE_MS;

export interface IntentRecord {
  v: 1;
  key: string;
  /**
   * When the key was made, restarted when it is first sent: from then on the server may know it, and the
   * intent's age (`maxIntentAgeMs`) counts from then.
   */
  createdAt: number;
  /** Set before an attempt is sent, removed with the whole record when the outcome is final. */
  sent: SentAttempt | null;
}

export interface IntentStore {
  subscribe(listener: () => void): () => void;
  /** The stored text of the record: the snapshot for useSyncExternalStore (a string compares by value). */
  read(): string | null;
  /** Replaces the record (null: forgets the intent) and notifies the subscribers. */
  write(record: IntentRecord | null): void;
  /**
   * The record, created with a fresh key if there is none — or, with `fresh`, whatever the current one holds
   * (then the mark of the key it replaces goes too).
   */
  ensure(fresh?: boolean): IntentRecord;
  /** Forgets the intent after a final outcome — only if it still has `key` (compare-and-delete) — and `key`'s mark. */
  retire(key: string): void;
  /**
   * The last sign of life (ms since the epoch) of a tab waiting for the outcome of the record's sent attempt, or
   * null: nothing sent, or no tab said it waits. A snapshot for useSyncExternalStore too (a number).
   */
  aliveAt(): number | null;
  /**
   * This tab waits for the outcome of the attempt sent under `key`, as of `at` (undefined: it no longer waits).
   * Writes only `key`'s mark, never the record; notifies the subscribers.
   */
  markAlive(key: string, at?: number): void;
}

export const STORAGE_PREFIX = 'idem:intent:';
/** Where a waiting tab's sign of life is kept: `idem:alive:<intentId>:<key>` (the time, in ms, as text). */
export const ALIVE_PREFIX = 'idem:alive:';

/** Per page life: used when no Web Storage is available (SSR never writes; private modes may throw). */
const memoryItems = new Map<string, string>();
const memoryStorage: KeyValueStorage = {
  getItem: (name) => memoryItems.get(name) ?? null,
  setItem: (name, value) => void memoryItems.set(name, value),
  removeItem: (name) => void memoryItems.delete(name),
};

function defaultStorage(): KeyValueStorage {
  try {
    // Reading window.sessionStorage throws a SecurityError when storage is blocked.
    if (typeof window !== 'undefined' && window.sessionStorage) return window.sessionStorage;
  } catch {}
  return memoryStorage;
}

const isNumber = (value: unknown): value is number => typeof value === 'number';

/** A time stored as text, or -Infinity when there is none or it is no number. */
function storedTime(text: string | null): number {
  const time = text === null ? Number.NaN : Number(text);
  return Number.isFinite(time) ? time : -Infinity;
}

/** A stored record, or null when there is none or it is not one this version wrote (then a new key is made). */
export function parseRecord(raw: string | null): IntentRecord | null {
  try {
    const record = JSON.parse(raw ?? 'null') as IntentRecord | null;
    if (record?.v !== 1 || typeof record.key !== 'string' || !isValidIdempotencyKey(record.key)) return null;
    // A record without a valid creation time is as old as can be: if it was sent, it is checked, never re-sent.
    if (!Number.isFinite(record.createdAt)) record.createdAt = 0;
    const sent = record.sent;
    if (typeof sent?.payload !== 'string' || !isNumber(sent.at)) record.sent = null;
    else if (sent.alive !== undefined && !isNumber(sent.alive)) delete sent.alive;
    return record;
  } catch {
    return null;
  }
}

/**
 * The store of `intentId` in the storage `resolveStorage` gives (called lazily: never at module load or on the
 * server). Once the storage throws (blocked, quota exceeded), the store uses memory for the page life.
 */
function createIntentStore(intentId: string, resolveStorage: () => KeyValueStorage): IntentStore {
  const name = STORAGE_PREFIX + intentId;
  const markPrefix = `${ALIVE_PREFIX + intentId}:`;
  const listeners = new Set<() => void>();
  let storage: KeyValueStorage | undefined;
  const withStorage = <T>(use: (target: KeyValueStorage) => T): T => {
    try {
      storage ??= resolveStorage();
      return use(storage);
    } catch {
      storage = memoryStorage;
      return use(storage);
    }
  };
  const notify = () => {
    for (const listener of listeners) listener();
  };
  // Another tab wrote this record or one of its marks (only a shared storage, such as localStorage, tells us).
  const onStorage = (event: StorageEvent) => {
    if (event.key === name || event.key === null || event.key.startsWith(markPrefix)) notify();
  };
  const read = () => withStorage((target) => target.getItem(name));
  const write = (record: IntentRecord | null) => {
    withStorage((target) =>
      record ? target.setItem(name, JSON.stringify(record)) : target.removeItem(name),
    );
    notify();
  };
  const forgetMark = (key: string) => withStorage((target) => target.removeItem(markPrefix + key));
  return {
    subscribe(listener) {
      if (!listeners.size && typeof window !== 'undefined') window.addEventListener('storage', onStorage);
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
        if (!listeners.size && typeof window !== 'undefined')
          window.removeEventListener('storage', onStorage);
      };
    },
    read,
    write,
    ensure(fresh) {
      const current = parseRecord(read());
      let record = fresh ? null : current;
      if (!record) {
        // A tab gone without a goodbye may have left the replaced key's mark: nothing reads it any more.
        if (current) forgetMark(current.key);
        write({ v: 1, key: createIdempotencyKey(), createdAt: Date.now(), sent: null });
        record = parseRecord(read());
      }
      if (!record) throw new Error('The idempotency key could not be stored');
      return record;
    },
    retire(key) {
      if (parseRecord(read())?.key === key) write(null);
      forgetMark(key);
    },
    aliveAt() {
      const record = parseRecord(read());
      if (!record?.sent) return null;
      const marked = storedTime(withStorage((target) => target.getItem(markPrefix + record.key)));
      const at = Math.max(marked, record.sent.alive ?? -Infinity);
      return at === -Infinity ? null : at;
    },
    markAlive(key, at) {
      withStorage((target) =>
        at === undefined ? target.removeItem(markPrefix + key) : target.setItem(markPrefix + key, String(at)),
      );
      notify();
    },
  };
}

const stores = new WeakMap<object, Map<string, IntentStore>>();

/**
 * The store of `intentId` in `storage` (undefined → window.sessionStorage, resolved lazily; null → memory only,
 * nothing survives a reload). The same instance for the same arguments, so that every hook of an intent
 * hears the others' writes and shares its fallback to memory.
 */
export function getIntentStore(intentId: string, storage: KeyValueStorage | null | undefined): IntentStore {
  // Keyed by the storage object; by `defaultStorage` for the default one.
  const token = storage === undefined ? defaultStorage : (storage ?? memoryStorage);
  const byIntent = stores.get(token) ?? new Map<string, IntentStore>();
  stores.set(token, byIntent);
  const store =
    byIntent.get(intentId) ??
    createIntentStore(intentId, storage === undefined ? defaultStorage : () => storage ?? memoryStorage);
  byIntent.set(intentId, store);
  return store;
}

/**
 * While this tab waits for the outcome of the attempt sent under `key`, keeps its mark fresh (set at once, then
 * every ALIVE_INTERVAL_MS while the record holds that attempt), so other tabs sharing the storage show the
 * payment as in flight rather than in doubt. Call it before writing the sent record: a tab that sees the record
 * then sees it alive. The mark is removed when the page goes away (a reload then shows the attempt in doubt at
 * once) and when the returned `stop` is called. The record itself is only read.
 */
export function keepAlive(store: IntentStore, key: string): () => void {
  const stop = () => store.markAlive(key);
  store.markAlive(key, Date.now());
  const timer = setInterval(() => {
    const record = parseRecord(store.read());
    if (record?.key === key && record.sent) store.markAlive(key, Date.now());
  }, ALIVE_INTERVAL_MS);
  if (typeof window !== 'undefined') window.addEventListener('pagehide', stop);
  return () => {
    clearInterval(timer);
    if (typeof window !== 'undefined') window.removeEventListener('pagehide', stop);
    stop();
  };
}
