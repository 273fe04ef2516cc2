/**
 * The persisted state of one intent: its key and, while an attempt may be in flight, the payload it
 * was sent with. One record per intent in the storage the hook is given (`idem:intent:<intentId>`; default
 * sessionStorage: per tab; localStorage: shared by the tabs), so a reload, the back button
 * or a resubmit finds the same key. Shared by every hook instance of the same (storage, intent), with change
 * notifications for `useSyncExternalStore` — also for writes by other tabs (the `storage` event).
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
   * The sending tab's last sign of life while it waits for the outcome (ms since the epoch), refreshed every
   * `ALIVE_INTERVAL_MS` and removed when that tab leaves. Recent: the attempt is in flight in some tab, not in
   * doubt.
   */
  alive?: number;
}

/** How often a tab waiting for an outcome refreshes `SentAttempt.alive`. */
export const ALIVE_INTERVAL_MS = 2_000;
/** After this long without a sign of life, the sending tab is taken as gone and the attempt as in doubt. */
export const ALIVE_STALE_MS = 4 * ALIVE_INTERVAL_MS;

/** True while the tab that sent `sent` is still waiting for its outcome (it may be another tab). */
export const isAlive = (sent: SentAttempt | null | undefined, now = Date.now()): boolean =>
  now - (sent?.alive ?? -Infinity) < ALIVE_STALE_MS;

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
  /** The record, created with a fresh key if there is none — or, with `fresh`, whatever the current one holds. */
  ensure(fresh?: boolean): IntentRecord;
  /** Forgets the intent after a final outcome — only if it still has `key` (compare-and-delete). */
  retire(key: string): void;
}

export const STORAGE_PREFIX = 'idem:intent:';

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
 * The store of `name` in the storage `resolveStorage` gives (called lazily: never at module load or on the
 * server). Once the storage throws (blocked, quota exceeded), the store uses memory for the page life.
 */
function createIntentStore(name: string, resolveStorage: () => KeyValueStorage): IntentStore {
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
  // Another tab wrote this record (only a shared storage, such as localStorage, tells us).
  const onStorage = (event: StorageEvent) => {
    if (event.key === name || event.key === null) notify();
  };
  const read = () => withStorage((target) => target.getItem(name));
  const write = (record: IntentRecord | null) => {
    withStorage((target) =>
      record ? target.setItem(name, JSON.stringify(record)) : target.removeItem(name),
    );
    notify();
  };
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
      let record = fresh ? null : parseRecord(read());
      if (!record) {
        write({ v: 1, key: createIdempotencyKey(), createdAt: Date.now(), sent: null });
        record = parseRecord(read());
      }
      if (!record) throw new Error('The idempotency key could not be stored');
      return record;
    },
    retire(key) {
      if (parseRecord(read())?.key === key) write(null);
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
    createIntentStore(
      STORAGE_PREFIX + intentId,
      storage === undefined ? defaultStorage : () => storage ?? memoryStorage,
    );
  byIntent.set(intentId, store);
  return store;
}

/**
 * While this tab waits for the outcome of the attempt sent under `key`, keeps its `alive` mark fresh, so other
 * tabs sharing the storage show the payment as in flight rather than in doubt; the mark is removed when the
 * page goes away (a reload then shows the attempt in doubt at once) and when the returned `stop` is called.
 */
export function keepAlive(store: IntentStore, key: string): () => void {
  const mark = (alive?: number) => {
    const record = parseRecord(store.read());
    if (record?.key === key && record.sent) store.write({ ...record, sent: { ...record.sent, alive } });
  };
  const timer = setInterval(() => mark(Date.now()), ALIVE_INTERVAL_MS);
  const onPageHide = () => mark();
  if (typeof window !== 'undefined') window.addEventListener('pagehide', onPageHide);
  return () => {
    clearInterval(timer);
    if (typeof window !== 'undefined') window.removeEventListener('pagehide', onPageHide);
    mark();
  };
}
