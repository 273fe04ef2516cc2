// @vitest-environment happy-dom
/** useIdempotencyKey: one key per intent, in sessionStorage; in-doubt attempts survive a reload. */
import { act, cleanup, renderHook } from '@testing-library/react';
import { createElement, StrictMode } from 'react';
import { hydrateRoot } from 'react-dom/client';
import { renderToString } from 'react-dom/server';
import superjson from 'superjson';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { jsonSerializer, type KeyValueStorage, useIdempotencyKey } from '../src/react/index.ts';

afterEach(() => {
  cleanup();
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
});
