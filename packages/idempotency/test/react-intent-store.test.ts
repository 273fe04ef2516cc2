// @vitest-environment happy-dom
/**
 * The intent store under the hooks: what it writes to and reads back from storage (`idem:intent:<id>`), which
 * stored records it trusts, how it tells its subscribers about writes (its own and another tab's), and the
 * `alive` mark a waiting tab keeps fresh.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ALIVE_INTERVAL_MS,
  ALIVE_STALE_MS,
  getIntentStore,
  type IntentRecord,
  isAlive,
  type KeyValueStorage,
  keepAlive,
  parseRecord,
} from '../src/react/intent-store.ts';
import { browserStorage } from './support/tabs-storage.ts';

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  window.sessionStorage.clear();
});

const KEY = '3f1c2b9e-8d7a-4e6f-9a5b-1c2d3e4f5a6b';

function tabStorage() {
  const items = new Map<string, string>();
  const storage: KeyValueStorage = {
    getItem: (name) => items.get(name) ?? null,
    setItem: vi.fn((name: string, value: string) => {
      items.set(name, value);
    }),
    removeItem: (name) => {
      items.delete(name);
    },
  };
  return { storage, items, setItem: storage.setItem as ReturnType<typeof vi.fn> };
}

let intents = 0;
/** A fresh intent id: stores are shared per (storage, intent) for the page's life. */
const newIntent = () => `store-test-${++intents}`;

const stored = (record: Record<string, unknown>) => JSON.stringify(record);
const aRecord = (sent: IntentRecord['sent'] = null): IntentRecord => ({
  v: 1,
  key: KEY,
  createdAt: 1_000,
  sent,
});

describe('parseRecord: which stored records are trusted', () => {
  it('reads back a record as written', () => {
    const record = aRecord({ payload: '{"a":1}', at: 2_000, alive: 2_500 });
    expect(parseRecord(JSON.stringify(record))).toEqual(record);
  });

  it('ignores nothing stored, malformed JSON and JSON that is no record', () => {
    expect(parseRecord(null)).toBeNull();
    expect(parseRecord('{not json')).toBeNull();
    expect(parseRecord('null')).toBeNull();
    expect(parseRecord('42')).toBeNull();
  });

  it('ignores a record of another version, or without a usable key', () => {
    expect(parseRecord(stored({ ...aRecord(), v: 2 }))).toBeNull();
    expect(parseRecord(stored({ ...aRecord(), v: undefined }))).toBeNull();
    expect(parseRecord(stored({ ...aRecord(), key: 42 }))).toBeNull();
    // An array whose text would pass as a key is still not a string.
    expect(parseRecord(stored({ ...aRecord(), key: [KEY] }))).toBeNull();
    expect(parseRecord(stored({ ...aRecord(), key: 'x'.repeat(256) }))).toBeNull();
    expect(parseRecord(stored({ ...aRecord(), key: 'not\na key' }))).toBeNull();
  });

  it('takes a record without a valid creation time as as old as can be (createdAt 0)', () => {
    expect(parseRecord(stored({ ...aRecord(), createdAt: undefined }))?.createdAt).toBe(0);
    expect(parseRecord(stored({ ...aRecord(), createdAt: 'yesterday' }))?.createdAt).toBe(0);
    expect(parseRecord(stored({ ...aRecord(), createdAt: 1_234 }))?.createdAt).toBe(1_234);
  });

  it('drops a sent attempt without a payload text or a numeric send time', () => {
    expect(parseRecord(stored({ ...aRecord(), sent: { payload: 1, at: 2_000 } }))?.sent).toBeNull();
    expect(parseRecord(stored({ ...aRecord(), sent: { payload: '{}', at: '2000' } }))?.sent).toBeNull();
    expect(parseRecord(stored({ ...aRecord(), sent: { payload: '{}' } }))?.sent).toBeNull();
    expect(parseRecord(stored({ ...aRecord(), sent: 'yes' }))?.sent).toBeNull();
  });

  it('drops a non-numeric alive mark and keeps a numeric one', () => {
    const withAlive = (alive: unknown) =>
      parseRecord(stored({ ...aRecord(), sent: { payload: '{}', at: 2_000, alive } }))?.sent;
    // A numeric-looking text would count as a sign of life (now - "…" is a number): it is dropped.
    expect(withAlive(String(Date.now()))).toEqual({ payload: '{}', at: 2_000 });
    expect(withAlive(null)).toEqual({ payload: '{}', at: 2_000 });
    expect(withAlive(2_500)).toEqual({ payload: '{}', at: 2_000, alive: 2_500 });
    expect(withAlive(undefined)).toEqual({ payload: '{}', at: 2_000 });
  });
});

describe('isAlive: is the sending tab still waiting?', () => {
  it('is true only while the last sign of life is younger than ALIVE_STALE_MS', () => {
    const now = 1_000_000;
    expect(isAlive(now, now)).toBe(true);
    expect(isAlive(now - ALIVE_STALE_MS + 1, now)).toBe(true);
    expect(isAlive(now - ALIVE_STALE_MS, now)).toBe(false);
  });

  it('is false without a sign of life', () => {
    expect(isAlive(null)).toBe(false);
    expect(isAlive(undefined)).toBe(false);
  });
});

describe('getIntentStore', () => {
  it('writes the record as JSON under idem:intent:<intentId>, and forgets it with null', () => {
    const { storage, items } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    const record = aRecord();
    store.write(record);
    expect(JSON.parse(items.get(`idem:intent:${intent}`) ?? 'null')).toEqual(record);
    expect(store.read()).toBe(items.get(`idem:intent:${intent}`));
    store.write(null);
    expect(items.has(`idem:intent:${intent}`)).toBe(false);
    expect(store.read()).toBeNull();
  });

  it('is the same store for the same storage and intent, and another for another storage', () => {
    const { storage } = tabStorage();
    const intent = newIntent();
    expect(getIntentStore(intent, storage)).toBe(getIntentStore(intent, storage));
    expect(getIntentStore(intent, storage)).not.toBe(getIntentStore(intent, tabStorage().storage));
    expect(getIntentStore(intent, undefined)).toBe(getIntentStore(intent, undefined));
    expect(getIntentStore(intent, null)).toBe(getIntentStore(intent, null));
    // Memory only (null) is not the default sessionStorage.
    expect(getIntentStore(intent, null)).not.toBe(getIntentStore(intent, undefined));
  });

  it('keeps a memory-only intent out of sessionStorage even when the same intent also uses the default', () => {
    const intent = newIntent();
    getIntentStore(intent, undefined).ensure();
    const inSession = window.sessionStorage.getItem(`idem:intent:${intent}`);
    const memory = getIntentStore(intent, null);
    memory.ensure(true);
    expect(window.sessionStorage.getItem(`idem:intent:${intent}`)).toBe(inSession);
    expect(parseRecord(memory.read())?.key).not.toBe(parseRecord(inSession)?.key);
  });

  it('uses window.sessionStorage by default', () => {
    const intent = newIntent();
    const record = getIntentStore(intent, undefined).ensure();
    expect(parseRecord(window.sessionStorage.getItem(`idem:intent:${intent}`))).toEqual(record);
  });

  it('falls back to memory where there is no window (and no sessionStorage)', () => {
    vi.stubGlobal('window', undefined);
    const store = getIntentStore(newIntent(), undefined);
    const record = store.ensure();
    expect(store.ensure()).toEqual(record);
  });

  it('ensure() keeps the stored record, makes one with a fresh key when there is none, and a new one with fresh', () => {
    const { storage } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    const made = store.ensure();
    expect(made).toMatchObject({ v: 1, sent: null });
    expect(store.ensure()).toEqual(made);
    const fresh = store.ensure(true);
    expect(fresh.key).not.toBe(made.key);
    expect(store.ensure()).toEqual(fresh);
  });

  it('ensure() replaces a stored record it cannot trust (malformed JSON) with a fresh one', () => {
    const { storage, items } = tabStorage();
    const intent = newIntent();
    items.set(`idem:intent:${intent}`, '{not json');
    const record = getIntentStore(intent, storage).ensure();
    expect(parseRecord(items.get(`idem:intent:${intent}`) ?? null)).toEqual(record);
  });

  it('ensure() throws when the storage silently keeps nothing', () => {
    const forgetful: KeyValueStorage = { getItem: () => null, setItem: () => {}, removeItem: () => {} };
    expect(() => getIntentStore(newIntent(), forgetful).ensure()).toThrow(
      'The idempotency key could not be stored',
    );
  });

  it('falls back to memory for the page life once the storage throws (quota exceeded), keeping the key', () => {
    const { storage, items } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    const first = store.ensure();
    vi.mocked(storage.setItem).mockImplementation(() => {
      throw new DOMException('full', 'QuotaExceededError');
    });
    const sent = { ...first, sent: { payload: '{}', at: 5 } };
    store.write(sent);
    expect(parseRecord(store.read())).toEqual(sent);
    // From then on the storage is no longer used, not even read.
    items.clear();
    expect(parseRecord(store.read())).toEqual(sent);
  });

  it('retire(key) forgets the intent only while it still has that key; on nothing stored it does nothing', () => {
    const { storage } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    store.retire(KEY);
    expect(store.read()).toBeNull();
    const record = store.ensure();
    store.retire(KEY);
    expect(parseRecord(store.read())).toEqual(record);
    store.retire(record.key);
    expect(store.read()).toBeNull();
  });

  it('notifies its subscribers of each write, until they unsubscribe', () => {
    const { storage } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    const a = vi.fn();
    const b = vi.fn();
    const stopA = store.subscribe(a);
    store.subscribe(b);
    store.write(aRecord());
    expect(a).toHaveBeenCalledTimes(1);
    expect(b).toHaveBeenCalledTimes(1);
    stopA();
    store.write(null);
    expect(a).toHaveBeenCalledTimes(1);
    expect(b).toHaveBeenCalledTimes(2);
  });

  it("notifies of another tab's write to this intent (the storage event), or of its clearing the storage", () => {
    const { storage } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    const listener = vi.fn();
    const stop = store.subscribe(listener);
    window.dispatchEvent(new StorageEvent('storage', { key: `idem:intent:${intent}` }));
    expect(listener).toHaveBeenCalledTimes(1);
    window.dispatchEvent(new StorageEvent('storage', { key: null }));
    expect(listener).toHaveBeenCalledTimes(2);
    window.dispatchEvent(new StorageEvent('storage', { key: 'idem:intent:another' }));
    window.dispatchEvent(new StorageEvent('storage', { key: `idem:intent:${intent}-2` }));
    expect(listener).toHaveBeenCalledTimes(2);
    stop();
    window.dispatchEvent(new StorageEvent('storage', { key: `idem:intent:${intent}` }));
    expect(listener).toHaveBeenCalledTimes(2);
  });

  it('keeps hearing other tabs while one subscriber is left; leaves no listener on window after the last', () => {
    const { storage } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    const added = vi.spyOn(window, 'addEventListener');
    const removed = vi.spyOn(window, 'removeEventListener');
    const a = vi.fn();
    const b = vi.fn();
    const stopA = store.subscribe(a);
    const stopB = store.subscribe(b);
    expect(added.mock.calls.filter(([type]) => type === 'storage')).toHaveLength(1);
    stopA();
    expect(removed).not.toHaveBeenCalled();
    window.dispatchEvent(new StorageEvent('storage', { key: `idem:intent:${intent}` }));
    expect(b).toHaveBeenCalledTimes(1);
    stopB();
    expect(removed.mock.calls.filter(([type]) => type === 'storage')).toHaveLength(1);
    expect(removed.mock.calls[0]?.[1]).toBe(added.mock.calls.find(([type]) => type === 'storage')?.[1]);
  });

  it('subscribes without a window (no cross-tab events there)', () => {
    const { storage } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    vi.stubGlobal('window', undefined);
    const listener = vi.fn();
    const stop = store.subscribe(listener);
    store.write(aRecord());
    expect(listener).toHaveBeenCalledOnce();
    stop();
  });
});

describe('aliveAt and markAlive: the sign of life, apart from the record', () => {
  const start = 1_700_000_000_000;
  const sent = (alive?: number): IntentRecord => ({
    v: 1,
    key: KEY,
    createdAt: start,
    sent: { payload: '{}', at: start, ...(alive === undefined ? {} : { alive }) },
  });

  it("is kept under idem:alive:<intentId>:<key> as the time's text; removed with no time", () => {
    const { storage, items } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    store.write(sent());
    store.markAlive(KEY, start + 5);
    expect(items.get(`idem:alive:${intent}:${KEY}`)).toBe(String(start + 5));
    expect(JSON.parse(items.get(`idem:intent:${intent}`) ?? 'null')).toEqual(sent());
    expect(store.aliveAt()).toBe(start + 5);
    store.markAlive(KEY);
    expect(items.has(`idem:alive:${intent}:${KEY}`)).toBe(false);
    expect(store.aliveAt()).toBeNull();
  });

  it("counts only the mark of the record's key, and only while it has a sent attempt", () => {
    const { storage } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    store.markAlive(KEY, start);
    expect(store.aliveAt()).toBeNull();
    store.write({ ...sent(), sent: null });
    expect(store.aliveAt()).toBeNull();
    store.write(sent());
    expect(store.aliveAt()).toBe(start);
    store.write({ ...sent(), key: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d' });
    expect(store.aliveAt()).toBeNull();
  });

  it('reads a mark kept inside the record (a tab of an earlier version), the later of the two if both', () => {
    const { storage } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    store.write(sent(start + 10));
    expect(store.aliveAt()).toBe(start + 10);
    store.markAlive(KEY, start + 5);
    expect(store.aliveAt()).toBe(start + 10);
    store.markAlive(KEY, start + 20);
    expect(store.aliveAt()).toBe(start + 20);
  });

  it('takes a mark that is no number for none', () => {
    const { storage, items } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    store.write(sent());
    for (const text of ['soon', 'NaN', 'Infinity', '-Infinity']) {
      items.set(`idem:alive:${intent}:${KEY}`, text);
      expect(store.aliveAt()).toBeNull();
    }
  });

  it('markAlive notifies the subscribers; another tab writing a mark of this intent does too', () => {
    const { storage } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    const listener = vi.fn();
    const stop = store.subscribe(listener);
    store.markAlive(KEY, start);
    expect(listener).toHaveBeenCalledTimes(1);
    window.dispatchEvent(new StorageEvent('storage', { key: `idem:alive:${intent}:${KEY}` }));
    expect(listener).toHaveBeenCalledTimes(2);
    window.dispatchEvent(new StorageEvent('storage', { key: `idem:alive:other-intent:${KEY}` }));
    expect(listener).toHaveBeenCalledTimes(2);
    stop();
  });

  it('retire(key) and a fresh ensure() remove the mark of the key they drop', () => {
    const { storage, items } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    store.write(sent());
    store.markAlive(KEY, start);
    store.retire(KEY);
    expect(items.has(`idem:alive:${intent}:${KEY}`)).toBe(false);

    store.write(sent());
    store.markAlive(KEY, start);
    const fresh = store.ensure(true);
    expect(fresh.key).not.toBe(KEY);
    expect(items.has(`idem:alive:${intent}:${KEY}`)).toBe(false);
    // Keeping the record keeps its mark.
    store.markAlive(fresh.key, start);
    store.ensure();
    expect(items.get(`idem:alive:${intent}:${fresh.key}`)).toBe(String(start));
  });
});

describe('keepAlive: the sign of life of a tab waiting for an outcome', () => {
  const start = 1_700_000_000_000;
  const sentRecord = (key = KEY): IntentRecord => ({
    v: 1,
    key,
    createdAt: start,
    sent: { payload: '{}', at: start },
  });

  it('marks at once, refreshes every ALIVE_INTERVAL_MS, and removes the mark when stopped; never writes the record', () => {
    vi.useFakeTimers({ now: start });
    const { storage, setItem } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    store.write(sentRecord());
    const recordWrites = () => setItem.mock.calls.filter(([name]) => name === `idem:intent:${intent}`).length;
    const stop = keepAlive(store, KEY);
    expect(store.aliveAt()).toBe(start);
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS);
    expect(store.aliveAt()).toBe(start + ALIVE_INTERVAL_MS);
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS);
    expect(store.aliveAt()).toBe(start + 2 * ALIVE_INTERVAL_MS);
    stop();
    expect(store.aliveAt()).toBeNull();
    // Stopped: no more refreshes.
    vi.advanceTimersByTime(3 * ALIVE_INTERVAL_MS);
    expect(store.aliveAt()).toBeNull();
    expect(recordWrites()).toBe(1);
    expect(parseRecord(store.read())).toEqual(sentRecord());
  });

  it('removes the mark when the page goes away (pagehide), and listens no more once stopped', () => {
    vi.useFakeTimers({ now: start });
    const { storage, setItem } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    store.write(sentRecord());
    const stop = keepAlive(store, KEY);
    window.dispatchEvent(new Event('pagehide'));
    expect(store.aliveAt()).toBeNull();
    stop();
    const writes = setItem.mock.calls.length;
    window.dispatchEvent(new Event('pagehide'));
    expect(setItem).toHaveBeenCalledTimes(writes);
  });

  it('refreshes no more once the record holds another key, or nothing sent, or nothing', () => {
    vi.useFakeTimers({ now: start });
    const { storage, items } = tabStorage();
    const intent = newIntent();
    const store = getIntentStore(intent, storage);
    store.write(sentRecord());
    const stop = keepAlive(store, KEY);
    const mark = () => items.get(`idem:alive:${intent}:${KEY}`);

    const other = sentRecord('9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d');
    store.write(other);
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS);
    expect(mark()).toBe(String(start));
    expect(parseRecord(store.read())).toEqual(other);

    const unsent = { ...sentRecord(), sent: null };
    store.write(unsent);
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS);
    expect(mark()).toBe(String(start));
    expect(parseRecord(store.read())).toEqual(unsent);

    store.write(null);
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS);
    expect(mark()).toBe(String(start));
    stop();
    expect(mark()).toBeUndefined();
    expect(store.read()).toBeNull();
  });

  it('works without a window (no pagehide there)', () => {
    vi.useFakeTimers({ now: start });
    const { storage } = tabStorage();
    const store = getIntentStore(newIntent(), storage);
    store.write(sentRecord());
    vi.stubGlobal('window', undefined);
    const stop = keepAlive(store, KEY);
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS);
    expect(store.aliveAt()).toBe(start + ALIVE_INTERVAL_MS);
    stop();
    expect(store.aliveAt()).toBeNull();
  });
});

describe("two tabs sharing localStorage, each reading its own copy until the other tab's writes reach it", () => {
  const start = 1_700_000_000_000;
  const NEW_KEY = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
  const sentAt = (key: string, payload: string, at: number): IntentRecord => ({
    v: 1,
    key,
    createdAt: at,
    sent: { payload, at },
  });

  /**
   * Tab A pays under KEY and waits for the outcome; tab B, which has seen that attempt, starts a new purchase
   * under NEW_KEY. Nothing of B's has reached A yet when A's next refresh runs.
   */
  function newPurchaseUnseenByTheWaitingTab() {
    vi.useFakeTimers({ now: start });
    const browser = browserStorage();
    const intent = newIntent();
    const tabA = browser.tab();
    const tabB = browser.tab();
    const a = getIntentStore(intent, tabA);
    const b = getIntentStore(intent, tabB);
    a.write(sentAt(KEY, '{"cart":"first"}', start));
    const stopA = keepAlive(a, KEY);
    tabB.deliver();
    expect(parseRecord(b.read())?.key).toBe(KEY);

    vi.advanceTimersByTime(ALIVE_INTERVAL_MS / 2);
    b.write(sentAt(NEW_KEY, '{"cart":"second"}', Date.now()));
    return { browser, intent, tabA, tabB, a, b, stopA };
  }

  it('CONTROL: a refresh that rewrites the whole record from the stale copy writes the old intent back', () => {
    const { browser, intent, tabA, tabB, a, b, stopA } = newPurchaseUnseenByTheWaitingTab();
    stopA();
    // The refresh as a rewrite of the record: what A reads is its copy, still the first intent.
    const stale = parseRecord(a.read());
    if (!stale?.sent) throw new Error('tab A has no sent attempt');
    a.write({ ...stale, sent: { ...stale.sent, alive: Date.now() } });
    tabA.deliver();
    tabB.deliver();
    expect(parseRecord(browser.stored.get(`idem:intent:${intent}`) ?? null)?.key).toBe(KEY);
    expect(parseRecord(b.read())?.key).toBe(KEY);
  });

  it("a waiting tab's refresh never writes its old intent over another tab's new purchase", () => {
    const { browser, intent, tabA, tabB, a, b, stopA } = newPurchaseUnseenByTheWaitingTab();
    const writesBefore = tabA.writes.length;
    // A's refresh runs while B's new purchase has not reached A.
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS / 2);
    expect(tabA.writes.length).toBeGreaterThan(writesBefore);
    tabA.deliver();
    tabB.deliver();
    const newPurchase = { key: NEW_KEY, sent: { payload: '{"cart":"second"}' } };
    expect(parseRecord(browser.stored.get(`idem:intent:${intent}`) ?? null)).toMatchObject(newPurchase);
    expect(parseRecord(b.read())).toMatchObject(newPurchase);
    expect(parseRecord(a.read())).toMatchObject(newPurchase);
    // The refresh wrote its mark, never the record.
    expect(tabA.writes.slice(writesBefore)).not.toContain(`idem:intent:${intent}`);
    // A's outcome arrives: it leaves B's purchase alone.
    stopA();
    a.retire(KEY);
    tabB.deliver();
    expect(parseRecord(b.read())).toMatchObject(newPurchase);
  });

  it("the old key's late mark neither shows the new purchase in flight nor touches the new purchase's own mark", () => {
    const { browser, intent, tabA, tabB, a, b, stopA } = newPurchaseUnseenByTheWaitingTab();
    // B has not marked its attempt (its tab went away at once): A's refresh must not make it look alive.
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS / 2);
    tabA.deliver();
    tabB.deliver();
    expect(browser.stored.get(`idem:alive:${intent}:${KEY}`)).toBe(String(start + ALIVE_INTERVAL_MS));
    expect(b.aliveAt()).toBeNull();
    expect(a.aliveAt()).toBeNull();

    // B waits for its attempt: its mark is its own, whatever A's refresh writes meanwhile.
    const stopB = keepAlive(b, NEW_KEY);
    vi.advanceTimersByTime(ALIVE_INTERVAL_MS);
    tabA.deliver();
    tabB.deliver();
    expect(b.aliveAt()).toBe(Date.now());
    expect(a.aliveAt()).toBe(Date.now());
    // A leaves: only its own mark goes.
    stopA();
    tabB.deliver();
    expect(browser.stored.has(`idem:alive:${intent}:${KEY}`)).toBe(false);
    expect(b.aliveAt()).toBe(Date.now());
    stopB();
    expect([...browser.stored.keys()].filter((name) => name.startsWith('idem:alive:'))).toEqual([]);
  });
});
