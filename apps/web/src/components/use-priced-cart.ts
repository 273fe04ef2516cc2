'use client';

import { useQuery } from '@tanstack/react-query';
import { useTRPC } from '~/trpc/react';
import { useCart } from './cart-provider';

/**
 * The cart joined with the server's catalog. The total shown here is a preview; the server prices the
 * order again from its own catalog when it is placed.
 */
export type PricedCart = ReturnType<typeof usePricedCart>;

export function usePricedCart() {
  const trpc = useTRPC();
  const cart = useCart();
  const catalog = useQuery(trpc.catalog.list.queryOptions());
  const products = catalog.data ?? [];
  const lines = products
    .filter((product) => (cart.lines[product.sku] ?? 0) > 0)
    .map((product) => ({ product, quantity: cart.lines[product.sku] ?? 0 }));
  return {
    cart,
    lines,
    currency: lines[0]?.product.currency ?? 'usd',
    subtotalCents: lines.reduce((sum, line) => sum + line.product.priceCents * line.quantity, 0),
    isLoading: !cart.ready || catalog.isPending,
    error: catalog.error,
  };
}
