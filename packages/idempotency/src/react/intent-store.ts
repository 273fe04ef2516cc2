/**
 * The persisted state of one purchase intent: its key and, while an attempt may be in flight, the payload it
 * was sent with. One record per intent in sessionStorage (`idem:intent:<intentId>`), so a reload, the back
 * button or a resubmit in the same tab finds the same key. Shared by every hook instance of the same
 * (storage, intent), with change notifications for `useSyncExternalStore`.
 */
import { createIdempotencyKey } from '../client/key.ts';

/** The part of the Web Storage API used (window.sessionStorage fits). */
export type KeyValueStorage = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;

export interface SentAttempt {
  /** The payload, serialized. */
  payload: string;
  /** When the attempt was sent (ms since the epoch). */
  at: number;
}

export interface IntentRecord {
  v: 1;
  key: string;
  createdAt: number;
  /** Set before an attempt is sent, removed with the whole record when the outcome is final. */
  sent: SentAttempt | null;
}

export const STORAGE_PREFIX = 'idem:intent:';
const VALID_KEY = /^[\x20-\x7e]{1,255}$/;

function createMemoryStorage(): KeyValueStorage {
  const items = new Map<string, string>();
  return {
    getItem: (name) => items.get(name) ?? null,
    setItem: (name, value) => {
      items.set(name, String(value));
    },
    removeItem: (name) => {
      items.delete(name);
    },
  };
}

/** Per page life: used when no Web Storage is available (SSR never writes; private modes may throw). */
const memoryStorage = createMemoryStorage();

function defaultStorage(): KeyValueStorage {
  try {
    // Reading window.sessionStorage throws a SecurityError when storage is blocked.
    if (typeof window !== 'undefined' && window.sessionStorage) return window.sessionStorage;
  } catch {}
  return memoryStorage;
}

function parseRecord(raw: string | null): IntentRecord | null {
  if (raw === null) return null;
  try {
    const value: unknown = JSON.parse(raw);
    if (value === null || typeof value !== 'object') return null;
    const record = value as Partial<IntentRecord>;
    if (record.v !== 1 || typeof record.key !== 'string' || !VALID_KEY.test(record.key)) return null;
    const sent = record.sent;
    const validSent =
      sent !== null &&
      typeof sent === 'object' &&
      typeof sent.payload === 'string' &&
      typeof sent.at === 'number';
    return {
      v: 1,
      key: record.key,
      createdAt: typeof record.createdAt === 'number' ? record.createdAt : 0,
      sent: validSent ? { payload: sent.payload, at: sent.at } : null,
    };
  } catch {
    return null;
  }
}

export class IntentStore {
  readonly #name: string;
  readonly #resolveStorage: () => KeyValueStorage;
  #storage: KeyValueStorage | undefined;
  readonly #listeners = new Set<() => void>();
  #cachedRaw: string | null | undefined;
  #cached: IntentRecord | null = null;

  constructor(intentId: string, resolveStorage: () => KeyValueStorage) {
    this.#name = STORAGE_PREFIX + intentId;
    this.#resolveStorage = resolveStorage;
  }

  /** Resolved lazily: never at module load or on the server. */
  #getStorage(): KeyValueStorage {
    this.#storage ??= this.#resolveStorage();
    return this.#storage;
  }

  #read(): string | null {
    try {
      return this.#getStorage().getItem(this.#name);
    } catch {
      this.#storage = memoryStorage;
      return memoryStorage.getItem(this.#name);
    }
  }

  #write(record: IntentRecord | null): void {
    const raw = record === null ? null : JSON.stringify(record);
    try {
      if (raw === null) this.#getStorage().removeItem(this.#name);
      else this.#getStorage().setItem(this.#name, raw);
    } catch {
      // Quota exceeded or storage blocked: keep working for this page life.
      this.#storage = memoryStorage;
      if (raw === null) memoryStorage.removeItem(this.#name);
      else memoryStorage.setItem(this.#name, raw);
    }
    for (const listener of this.#listeners) listener();
  }

  subscribe = (listener: () => void): (() => void) => {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  };

  /** The current record; the same object until the stored text changes (as useSyncExternalStore requires). */
  getSnapshot = (): IntentRecord | null => {
    const raw = this.#read();
    if (raw !== this.#cachedRaw) {
      this.#cachedRaw = raw;
      this.#cached = parseRecord(raw);
    }
    return this.#cached;
  };

  /** The record, created with a fresh key if there is none. */
  ensure(): IntentRecord {
    const existing = this.getSnapshot();
    if (existing) return existing;
    this.#write({ v: 1, key: createIdempotencyKey(), createdAt: Date.now(), sent: null });
    const created = this.getSnapshot();
    if (!created) throw new Error('The idempotency key could not be stored.');
    return created;
  }

  /** Records that an attempt with `payload` is being sent under `key` (a no-op if `key` was replaced). */
  markSent(key: string, payload: string): void {
    const record = this.getSnapshot();
    if (record?.key !== key) return;
    this.#write({ ...record, sent: { payload, at: Date.now() } });
  }

  /** Forgets the intent after a final outcome — only if it still has `key` (compare-and-delete). */
  retire(key: string): void {
    if (this.getSnapshot()?.key === key) this.#write(null);
  }

  /** Starts over with a fresh key, whatever the current record holds. */
  replace(): IntentRecord {
    this.#write({ v: 1, key: createIdempotencyKey(), createdAt: Date.now(), sent: null });
    return this.ensure();
  }
}

const DEFAULT_STORAGE = {};
const MEMORY_STORAGE = {};
const stores = new WeakMap<object, Map<string, IntentStore>>();

/**
 * The store of `intentId` in `storage` (undefined → window.sessionStorage, resolved lazily; null → memory only,
 * nothing survives a reload). The same instance for the same arguments.
 */
export function getIntentStore(intentId: string, storage: KeyValueStorage | null | undefined): IntentStore {
  const token: object = storage === undefined ? DEFAULT_STORAGE : storage === null ? MEMORY_STORAGE : storage;
  let byIntent = stores.get(token);
  if (!byIntent) {
    byIntent = new Map();
    stores.set(token, byIntent);
  }
  let store = byIntent.get(intentId);
  if (!store) {
    const resolve = storage === undefined ? defaultStorage : () => storage ?? memoryStorage;
    store = new IntentStore(intentId, resolve);
    byIntent.set(intentId, store);
  }
  return store;
}
