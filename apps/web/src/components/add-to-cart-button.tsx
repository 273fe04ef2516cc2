'use client';

import { useState } from 'react';
import { useCart } from './cart-provider';

/**
 * The visible text is part of the accessible name ("Add Stoneware Mug to cart": the product's name is there for
 * screen readers only), and the name stays the same after a click; "Added" is announced by a status beside it.
 */
export function AddToCartButton({ sku, name, disabled }: { sku: string; name: string; disabled: boolean }) {
  const cart = useCart();
  const [added, setAdded] = useState(false);
  return (
    <span className="inline-flex items-center gap-2">
      <span role="status" className="text-sm text-brand-700">
        {added ? (
          <>
            Added<span className="sr-only"> {name} to the cart</span> ✓
          </>
        ) : null}
      </span>
      <button
        type="button"
        disabled={disabled}
        onClick={() => {
          cart.add(sku);
          setAdded(true);
          setTimeout(() => setAdded(false), 1200);
        }}
        className="rounded-lg bg-brand-600 px-4 py-2 text-sm font-medium text-white transition hover:bg-brand-700 disabled:cursor-not-allowed disabled:bg-stone-300 disabled:text-stone-700"
      >
        {disabled ? (
          <>
            Sold out<span className="sr-only">: {name}</span>
          </>
        ) : (
          <>
            Add<span className="sr-only"> {name}</span> to cart
          </>
        )}
      </button>
    </span>
  );
}
