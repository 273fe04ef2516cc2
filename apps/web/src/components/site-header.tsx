'use client';

import Link from 'next/link';
import { useCart } from './cart-provider';

export function SiteHeader() {
  const cart = useCart();
  return (
    <header className="border-b border-stone-200 bg-white">
      <div className="mx-auto flex max-w-6xl items-center justify-between px-6 py-4">
        <Link
          href="/"
          className="flex items-center gap-2 text-lg font-semibold tracking-tight text-brand-900"
        >
          <span
            aria-hidden
            className="grid size-8 place-items-center rounded-lg bg-brand-600 text-sm text-white"
          >
            Id
          </span>
          Idem Supply Co.
        </Link>
        <nav aria-label="Main" className="flex items-center gap-6 text-sm font-medium text-stone-600">
          <Link href="/" className="hover:text-stone-900">
            Shop
          </Link>
          <Link href="/orders" className="hover:text-stone-900">
            Orders
          </Link>
          <Link
            href="/cart"
            className="rounded-full bg-stone-900 px-4 py-2 text-white hover:bg-stone-700"
            aria-label={`Cart, ${cart.count} ${cart.count === 1 ? 'item' : 'items'}`}
          >
            Cart <span data-testid="cart-count">{cart.ready ? cart.count : 0}</span>
          </Link>
        </nav>
      </div>
    </header>
  );
}
