'use client';

import { useState } from 'react';
import { useCart } from './cart-provider';

export function AddToCartButton({ sku, name, disabled }: { sku: string; name: string; disabled: boolean }) {
  const cart = useCart();
  const [added, setAdded] = useState(false);
  return (
    <button
      type="button"
      disabled={disabled}
      aria-label={`Add ${name} to cart`}
      onClick={() => {
        cart.add(sku);
        setAdded(true);
        setTimeout(() => setAdded(false), 1200);
      }}
      className="rounded-lg bg-brand-600 px-4 py-2 text-sm font-medium text-white transition hover:bg-brand-700 disabled:cursor-not-allowed disabled:bg-stone-300"
    >
      {disabled ? 'Sold out' : added ? 'Added ✓' : 'Add to cart'}
    </button>
  );
}
