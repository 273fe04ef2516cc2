/**
 * localStorage as the tabs of one browser see it: one stored map (the browser's) and, per tab, the copy its page
 * reads from. A tab's write changes its own copy and the stored map at once, in the order the writes are made;
 * another tab's copy takes it only when the test calls `deliver()` on that tab (which also fires the `storage`
 * event there) — as a Chromium renderer applies another tab's write when its message arrives, between tasks. So a
 * test decides, write by write, what each tab has seen: no timer decides an interleaving.
 */
import type { KeyValueStorage } from '../../src/react/intent-store.ts';

export interface Tab extends KeyValueStorage {
  /** Applies the other tabs' writes that reached this tab, in order, then tells its page (`storage` events). */
  deliver(): void;
  /** The names this tab wrote or removed, in order. */
  readonly writes: readonly string[];
}

export function browserStorage() {
  const stored = new Map<string, string>();
  const inboxes = new Set<Array<[name: string, value: string | null]>>();

  function tab(): Tab {
    const copy = new Map(stored);
    const inbox: Array<[string, string | null]> = [];
    inboxes.add(inbox);
    const writes: string[] = [];
    const change = (name: string, value: string | null) => {
      writes.push(name);
      for (const target of [copy, stored]) {
        if (value === null) target.delete(name);
        else target.set(name, value);
      }
      for (const other of inboxes) if (other !== inbox) other.push([name, value]);
    };
    return {
      getItem: (name) => copy.get(name) ?? null,
      setItem: (name, value) => change(name, value),
      removeItem: (name) => change(name, null),
      writes,
      deliver() {
        for (const [name, value] of inbox.splice(0)) {
          if (value === null) copy.delete(name);
          else copy.set(name, value);
          if (typeof window !== 'undefined') window.dispatchEvent(new StorageEvent('storage', { key: name }));
        }
      },
    };
  }

  return { tab, stored };
}
