'use client';

import { createContext, type ReactNode, useCallback, useContext, useEffect, useMemo, useState } from 'react';
import { MAX_QUANTITY } from '~/lib/schemas';

/** The cart holds only SKUs and quantities; prices always come from the server's catalog. */
export type CartLines = Record<string, number>;

interface CartApi {
  lines: CartLines;
  /** False until the cart was read from localStorage (avoids a flash of "empty cart"). */
  ready: boolean;
  count: number;
  add(sku: string, quantity?: number): void;
  setQuantity(sku: string, quantity: number): void;
  remove(sku: string): void;
  clear(): void;
}

const STORAGE_KEY = 'idem.cart.v1';
const CartContext = createContext<CartApi | null>(null);

function readStoredCart(): CartLines {
  try {
    const parsed: unknown = JSON.parse(window.localStorage.getItem(STORAGE_KEY) ?? '{}');
    if (!parsed || typeof parsed !== 'object') return {};
    return Object.fromEntries(
      Object.entries(parsed).filter(
        (entry): entry is [string, number] =>
          Number.isInteger(entry[1]) && entry[1] > 0 && entry[1] <= MAX_QUANTITY,
      ),
    );
  } catch {
    return {};
  }
}

export function CartProvider({ children }: { children: ReactNode }) {
  const [lines, setLines] = useState<CartLines>({});
  const [ready, setReady] = useState(false);

  useEffect(() => {
    setLines(readStoredCart());
    setReady(true);
    // Keep several tabs in step.
    const onStorage = (event: StorageEvent) => {
      if (event.key === STORAGE_KEY) setLines(readStoredCart());
    };
    window.addEventListener('storage', onStorage);
    return () => window.removeEventListener('storage', onStorage);
  }, []);

  const update = useCallback((change: (current: CartLines) => CartLines) => {
    setLines((current) => {
      const next = change(current);
      window.localStorage.setItem(STORAGE_KEY, JSON.stringify(next));
      return next;
    });
  }, []);

  const api = useMemo<CartApi>(
    () => ({
      lines,
      ready,
      count: Object.values(lines).reduce((sum, quantity) => sum + quantity, 0),
      add: (sku, quantity = 1) =>
        update((current) => ({ ...current, [sku]: Math.min(MAX_QUANTITY, (current[sku] ?? 0) + quantity) })),
      setQuantity: (sku, quantity) =>
        update((current) => {
          const { [sku]: _removed, ...rest } = current;
          return quantity > 0 ? { ...rest, [sku]: Math.min(MAX_QUANTITY, quantity) } : rest;
        }),
      remove: (sku) =>
        update((current) => {
          const { [sku]: _removed, ...rest } = current;
          return rest;
        }),
      clear: () => update(() => ({})),
    }),
    [lines, ready, update],
  );

  return <CartContext.Provider value={api}>{children}</CartContext.Provider>;
}

export function useCart(): CartApi {
  const cart = useContext(CartContext);
  if (!cart) throw new Error('useCart must be used inside <CartProvider>');
  return cart;
}
