// @vitest-environment happy-dom
/** useIdempotencyKey: one key per intent, in sessionStorage; in-doubt attempts survive a reload. */
import { act, cleanup, renderHook } from '@testing-library/react';
import { createElement, StrictMode } from 'react';
import { hydrateRoot } from 'react-dom/client';
import { renderToString } from 'react-dom/server';
import superjson from 'superjson';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { jsonSerializer, type KeyValueStorage, useIdempotencyKey } from '../src/react/index.ts';
import { ALIVE_STALE_MS } from '../src/react/intent-store.ts';
import { isIntentExpired } from '../src/react/use-idempotency-key.ts';

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  window.sessionStorage.clear();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A Storage of the test's own: a "tab" whose sessionStorage survives simulated reloads. */
function tabStorage() {
  const items = new Map<string, string>();
  const storage: KeyValueStorage = {
    getItem: vi.fn((name: string) => items.get(name) ?? null),
    setItem: vi.fn((name: string, value: string) => {
      items.set(name, value);
    }),
    removeItem: vi.fn((name: string) => {
      items.delete(name);
    }),
  };
  return { storage, items };
}

interface Order {
  sku: string;
  quantity: number;
}

describe('useIdempotencyKey', () => {
  it('creates one UUID per intent, stable across re-renders, stored under idem:intent:<id>', () => {
    const { storage, items } = tabStorage();
    const { result, rerender } = renderHook(() => useIdempotencyKey('checkout', { storage }));
    const key = result.current.key;
    expect(key).toMatch(UUID);
    rerender();
    rerender();
    expect(result.current.key).toBe(key);
    expect(JSON.parse(items.get('idem:intent:checkout') ?? 'null')).toMatchObject({ key, sent: null });
    expect(result.current.inDoubt).toBeNull();
  });

  it('keeps the key across a reload (unmount, then a new render with the same sessionStorage)', () => {
    const { storage } = tabStorage();
    const first = renderHook(() => useIdempotencyKey('checkout', { storage }));
    const key = first.result.current.key;
    first.unmount();

    const reloaded = renderHook(() => useIdempotencyKey('checkout', { storage }));
    expect(reloaded.result.current.key).toBe(key);
  });

  it('uses window.sessionStorage by default', () => {
    const first = renderHook(() => useIdempotencyKey('cart-42'));
    const key = first.result.current.key;
    expect(key).toMatch(UUID);
    expect(window.sessionStorage.getItem('idem:intent:cart-42')).toContain(key);
    first.unmount();
    expect(renderHook(() => useIdempotencyKey('cart-42')).result.current.key).toBe(key);
  });

  it('gives each intent its own key, and shares one between hooks of the same intent', () => {
    const { storage } = tabStorage();
    const { result } = renderHook(() => ({
      a: useIdempotencyKey('a', { storage }),
      a2: useIdempotencyKey('a', { storage }),
      b: useIdempotencyKey('b', { storage }),
    }));
    expect(result.current.a.key).toBe(result.current.a2.key);
    expect(result.current.a.key).not.toBe(result.current.b.key);
  });

  it('gives a new key after retire() (a final outcome)', () => {
    const { storage } = tabStorage();
    const { result } = renderHook(() => useIdempotencyKey<Order>('checkout', { storage }));
    const key = result.current.key;
    act(() => {
      result.current.markSent({ sku: 'TEA', quantity: 1 });
    });
    act(() => result.current.retire());
    expect(result.current.key).toMatch(UUID);
    expect(result.current.key).not.toBe(key);
    expect(result.current.inDoubt).toBeNull();
  });

  it('retire(key) leaves a newer key alone', () => {
    const { storage } = tabStorage();
    const { result } = renderHook(() => useIdempotencyKey('checkout', { storage }));
    const old = result.current.key ?? '';
    act(() => result.current.reset());
    const current = result.current.key;
    act(() => result.current.retire(old));
    expect(result.current.key).toBe(current);
  });

  it('retire(staleKey) while a newer attempt is in flight: that attempt stays in flight, not in doubt', () => {
    const { storage } = tabStorage();
    const { result } = renderHook(() => useIdempotencyKey<Order>('checkout', { storage }));
    const old = result.current.key ?? '';
    act(() => result.current.reset());
    act(() => {
      result.current.markSent({ sku: 'TEA', quantity: 1 });
    });
    expect(result.current.inDoubt).toBeNull();
    // A late outcome of the old attempt retires the old key only.
    act(() => result.current.retire(old));
    expect(result.current.inDoubt).toBeNull();
    // Control: the in-flight attempt's own outcome unknown (markInDoubt) shows it as in doubt.
    act(() => result.current.markInDoubt());
    expect(result.current.inDoubt).toMatchObject({ payload: { sku: 'TEA', quantity: 1 } });
  });

  it('reports an attempt sent before a reload as in doubt, with its payload', () => {
    const { storage } = tabStorage();
    const first = renderHook(() => useIdempotencyKey<Order>('checkout', { storage }));
    const key = first.result.current.key;
    let sentWith: string | undefined;
    act(() => {
      sentWith = first.result.current.markSent({ sku: 'TEA', quantity: 2 });
    });
    expect(sentWith).toBe(key);
    // In flight in this page: not in doubt (yet).
    expect(first.result.current.inDoubt).toBeNull();
    first.unmount(); // the page reloads mid-request

    const reloaded = renderHook(() => useIdempotencyKey<Order>('checkout', { storage }));
    expect(reloaded.result.current.key).toBe(key);
    expect(reloaded.result.current.inDoubt).toEqual({
      payload: { sku: 'TEA', quantity: 2 },
      sentAt: expect.any(Number),
      expired: false,
    });
  });

  it('reports an attempt as in doubt after markInDoubt() (retries exhausted)', () => {
    const { storage } = tabStorage();
    const { result } = renderHook(() => useIdempotencyKey<Order>('checkout', { storage }));
    act(() => {
      result.current.markSent({ sku: 'TEA', quantity: 1 });
    });
    act(() => result.current.markInDoubt());
    expect(result.current.inDoubt?.payload).toEqual({ sku: 'TEA', quantity: 1 });
  });

  it('reset() starts a new intent even when an attempt is in doubt', () => {
    const { storage } = tabStorage();
    const { result } = renderHook(() => useIdempotencyKey<Order>('checkout', { storage }));
    const key = result.current.key;
    act(() => {
      result.current.markSent({ sku: 'TEA', quantity: 1 });
      result.current.markInDoubt();
    });
    expect(result.current.inDoubt).not.toBeNull();
    act(() => result.current.reset());
    expect(result.current.key).not.toBe(key);
    expect(result.current.inDoubt).toBeNull();
  });

  it('refuses a payload that would come back as another request (a Date stored as JSON, sent by superjson)', () => {
    const { storage } = tabStorage();
    const { result } = renderHook(() =>
      useIdempotencyKey<{ at: Date }>('checkout', {
        storage,
        transformer: superjson,
        serializer: jsonSerializer,
      }),
    );
    expect(() => result.current.markSent({ at: new Date() })).toThrow(/serializer/);
  });

  it("stores payloads in the transformer's wire form: a Date and an undefined property come back as sent", () => {
    const { storage } = tabStorage();
    const payload = { at: new Date(0), coupon: undefined };
    const { result } = renderHook(() =>
      useIdempotencyKey<typeof payload>('checkout', { storage, transformer: superjson }),
    );
    act(() => {
      result.current.markSent(payload);
      result.current.markInDoubt();
    });
    expect(result.current.inDoubt?.payload).toStrictEqual(payload);
  });

  it('with storage: null keeps the key in memory (stable across re-renders)', () => {
    const { result, rerender } = renderHook(() => useIdempotencyKey('memory-only', { storage: null }));
    const key = result.current.key;
    expect(key).toMatch(UUID);
    rerender();
    expect(result.current.key).toBe(key);
    expect(window.sessionStorage.getItem('idem:intent:memory-only')).toBeNull();
  });

  it('falls back to memory when storage throws (blocked or full)', () => {
    const broken: KeyValueStorage = {
      getItem: () => {
        throw new DOMException('blocked', 'SecurityError');
      },
      setItem: () => {
        throw new DOMException('full', 'QuotaExceededError');
      },
      removeItem: () => {},
    };
    const { result, rerender } = renderHook(() => useIdempotencyKey('broken', { storage: broken }));
    const key = result.current.key;
    expect(key).toMatch(UUID);
    rerender();
    expect(result.current.key).toBe(key);
  });

  it('works under StrictMode (double effects create one key)', () => {
    const { storage, items } = tabStorage();
    const { result } = renderHook(() => useIdempotencyKey('strict', { storage }), { wrapper: StrictMode });
    expect(result.current.key).toMatch(UUID);
    expect(JSON.parse(items.get('idem:intent:strict') ?? 'null').key).toBe(result.current.key);
  });

  it('renders null on the server without touching storage, and hydrates without a mismatch', async () => {
    const { storage } = tabStorage();
    const seen: Array<string | null> = [];
    // biome-ignore lint/correctness/noComponentHookFactories: a one-test component that closes over this test's fixtures; rendered once.
    function Checkout() {
      const { key } = useIdempotencyKey('ssr', { storage });
      seen.push(key);
      return createElement('p', { 'data-key': key ?? '' }, key ? 'ready' : 'loading');
    }
    const html = renderToString(createElement(Checkout));
    expect(html).toContain('loading');
    expect(storage.getItem).not.toHaveBeenCalled();
    expect(storage.setItem).not.toHaveBeenCalled();

    const container = document.createElement('div');
    container.innerHTML = html;
    document.body.append(container);
    const recoverable = vi.fn();
    const root = await act(async () =>
      hydrateRoot(container, createElement(Checkout), { onRecoverableError: recoverable }),
    );
    expect(recoverable).not.toHaveBeenCalled();
    expect(seen[0]).toBeNull();
    expect(container.textContent).toBe('ready');
    expect(container.querySelector('p')?.getAttribute('data-key')).toMatch(UUID);
    act(() => root.unmount());
    container.remove();
  });

  it('an intent is re-sendable for maxIntentAgeMs from its first send, and a record dated over 5 min ahead is not', () => {
    const now = 1_700_000_000_000;
    const max = 60_000;
    expect(isIntentExpired(now - max + 1, max, now)).toBe(false);
    expect(isIntentExpired(now - max, max, now)).toBe(true);
    expect(isIntentExpired(now - 10 * max, max, now)).toBe(true);
    // A clock a little behind another tab's is tolerated; further ahead, the age is unknown: too old.
    expect(isIntentExpired(now + 5 * 60_000, max, now)).toBe(false);
    expect(isIntentExpired(now + 5 * 60_000 + 1, max, now)).toBe(true);
  });

  it('refuses a maxIntentAgeMs that is not a positive number', () => {
    const { storage } = tabStorage();
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      for (const maxIntentAgeMs of [0, -1, Number.NaN]) {
        expect(() => renderHook(() => useIdempotencyKey('checkout', { storage, maxIntentAgeMs }))).toThrow(
          new RangeError('maxIntentAgeMs must be a positive number'),
        );
      }
    } finally {
      error.mockRestore();
    }
    expect(
      renderHook(() => useIdempotencyKey('checkout', { storage, maxIntentAgeMs: 1 })).result.current.key,
    ).toMatch(UUID);
  });

  describe('as time passes, with nothing else happening', () => {
    const start = 1_700_000_000_000;
    const otherTabKey = '0b7c7a4e-3f7a-4c1e-9d3b-2a8f6e5d4c3b';
    /** Another tab's attempt, sent 10 s ago, with that tab's last sign of life at `alive`. */
    const inOtherTab = (items: Map<string, string>, alive: number) => {
      items.set(
        'idem:intent:checkout',
        JSON.stringify({
          v: 1,
          key: otherTabKey,
          createdAt: start - 10_000,
          sent: { payload: JSON.stringify({ sku: 'TEA', quantity: 1 }), at: start - 10_000 },
        }),
      );
      items.set(`idem:alive:checkout:${otherTabKey}`, String(alive));
    };

    it("another tab's attempt goes in doubt once its last sign of life is ALIVE_STALE_MS old", () => {
      vi.useFakeTimers({ now: start });
      const { storage, items } = tabStorage();
      // The other tab's last sign of life was 5 s ago: quiet from start + ALIVE_STALE_MS - 5 s.
      inOtherTab(items, start - 5_000);
      const { result } = renderHook(() => useIdempotencyKey<Order>('checkout', { storage }));
      expect(result.current).toMatchObject({ inFlightElsewhere: true, inDoubt: null });
      // Checked again only once it has gone quiet (a check just before would find it alive and look no more).
      act(() => vi.advanceTimersByTime(ALIVE_STALE_MS - 5_000 - 5));
      expect(result.current.inFlightElsewhere).toBe(true);
      act(() => vi.advanceTimersByTime(25));
      expect(result.current).toMatchObject({
        inFlightElsewhere: false,
        inDoubt: { payload: { sku: 'TEA', quantity: 1 }, expired: false },
      });
    });

    it('an attempt in doubt turns expired maxIntentAgeMs after its first send', () => {
      vi.useFakeTimers({ now: start });
      const { storage } = tabStorage();
      const { result } = renderHook(() =>
        useIdempotencyKey<Order>('checkout', { storage, maxIntentAgeMs: 60_000 }),
      );
      act(() => vi.advanceTimersByTime(1_000));
      act(() => {
        result.current.markSent({ sku: 'TEA', quantity: 1 });
        result.current.markInDoubt();
      });
      expect(result.current.inDoubt?.expired).toBe(false);
      act(() => vi.advanceTimersByTime(59_900));
      expect(result.current.inDoubt?.expired).toBe(false);
      act(() => vi.advanceTimersByTime(200));
      expect(result.current.inDoubt?.expired).toBe(true);
    });

    it("another tab's attempt goes quiet, then expires: each change shows on its own", () => {
      vi.useFakeTimers({ now: start });
      const { storage, items } = tabStorage();
      inOtherTab(items, start);
      const { result } = renderHook(() =>
        useIdempotencyKey<Order>('checkout', { storage, maxIntentAgeMs: 60_000 }),
      );
      expect(result.current.inFlightElsewhere).toBe(true);
      act(() => vi.advanceTimersByTime(ALIVE_STALE_MS + 100));
      expect(result.current.inDoubt?.expired).toBe(false);
      // createdAt was start - 10 s: expired from start + 50 s.
      act(() => vi.advanceTimersByTime(50_000 - ALIVE_STALE_MS));
      expect(result.current.inDoubt?.expired).toBe(true);
    });

    it('unmounting leaves no timer behind', () => {
      vi.useFakeTimers({ now: start });
      const { storage, items } = tabStorage();
      inOtherTab(items, start);
      const { unmount } = renderHook(() => useIdempotencyKey<Order>('checkout', { storage }));
      expect(vi.getTimerCount()).toBe(1);
      unmount();
      expect(vi.getTimerCount()).toBe(0);
    });
  });

  it('retire() when another tab already forgot the intent: nothing to do, a new key follows', () => {
    const { storage, items } = tabStorage();
    const { result } = renderHook(() => useIdempotencyKey('checkout', { storage }));
    const key = result.current.key;
    items.delete('idem:intent:checkout');
    act(() => result.current.retire());
    expect(result.current.key).toMatch(UUID);
    expect(result.current.key).not.toBe(key);
    expect(JSON.parse(items.get('idem:intent:checkout') ?? 'null')).toMatchObject({
      key: result.current.key,
      sent: null,
    });
  });

  it('acts on the new intent when intentId changes', () => {
    const { storage, items } = tabStorage();
    const { result, rerender } = renderHook(
      ({ intentId }) => useIdempotencyKey<Order>(intentId, { storage }),
      { initialProps: { intentId: 'first' } },
    );
    const first = result.current.key;
    rerender({ intentId: 'second' });
    const second = result.current.key;
    expect(second).not.toBe(first);
    let sentWith: string | undefined;
    act(() => {
      sentWith = result.current.markSent({ sku: 'TEA', quantity: 1 });
    });
    expect(sentWith).toBe(second);
    expect(JSON.parse(items.get('idem:intent:second') ?? 'null').sent).toMatchObject({
      at: expect.any(Number),
    });
    expect(JSON.parse(items.get('idem:intent:first') ?? 'null')).toMatchObject({ key: first, sent: null });
  });
});
