'use client';

import Link from 'next/link';
import { ProductArt } from '~/components/product-art';
import { usePricedCart } from '~/components/use-priced-cart';
import { formatMoney } from '~/lib/money';
import { MAX_QUANTITY } from '~/lib/schemas';

export default function CartPage() {
  const { cart, lines, currency, subtotalCents, isLoading, error } = usePricedCart();

  if (isLoading) return <p className="text-stone-500">Loading your cart…</p>;
  if (error) return <p role="alert">Could not load the catalog: {error.message}</p>;
  if (lines.length === 0) {
    return (
      <div className="rounded-2xl border border-dashed border-stone-300 p-10 text-center">
        <h1 className="text-xl font-semibold">Your cart is empty</h1>
        <Link href="/" className="mt-4 inline-block text-brand-700 underline">
          Browse the shop
        </Link>
      </div>
    );
  }

  return (
    <div className="grid gap-8 lg:grid-cols-[1fr_320px]">
      <section>
        <h1 className="mb-6 text-2xl font-semibold">Your cart</h1>
        <ul className="divide-y divide-stone-200 rounded-2xl border border-stone-200 bg-white">
          {lines.map(({ product, quantity }) => (
            <li
              key={product.sku}
              className="flex items-center gap-4 p-4"
              data-testid={`cart-line-${product.sku}`}
            >
              <ProductArt name={product.name} hue={product.imageHue} size="sm" />
              <div className="flex-1">
                <p className="font-medium">{product.name}</p>
                <p className="text-sm text-stone-500">
                  {formatMoney(product.priceCents, product.currency)} each
                </p>
              </div>
              <label className="flex items-center gap-2 text-sm">
                <span className="sr-only">Quantity of {product.name}</span>
                <select
                  value={quantity}
                  onChange={(event) => cart.setQuantity(product.sku, Number(event.target.value))}
                  className="rounded-lg border border-stone-300 bg-white px-2 py-1"
                >
                  {Array.from(
                    { length: Math.min(MAX_QUANTITY, Math.max(quantity, product.stock)) },
                    (_, index) => (
                      <option key={index + 1} value={index + 1}>
                        {index + 1}
                      </option>
                    ),
                  )}
                </select>
              </label>
              <p className="w-20 text-right font-medium">
                {formatMoney(product.priceCents * quantity, product.currency)}
              </p>
              <button
                type="button"
                onClick={() => cart.remove(product.sku)}
                className="text-sm text-stone-500 underline hover:text-red-700"
                aria-label={`Remove ${product.name} from cart`}
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
      </section>
      <aside className="h-fit rounded-2xl border border-stone-200 bg-white p-6">
        <h2 className="font-semibold">Summary</h2>
        <p className="mt-4 flex justify-between">
          <span>Subtotal</span>
          <span data-testid="cart-subtotal">{formatMoney(subtotalCents, currency)}</span>
        </p>
        <p className="mt-1 text-xs text-stone-500">
          Shipping is free. Final prices are confirmed at checkout.
        </p>
        <Link
          href="/checkout"
          className="mt-6 block rounded-lg bg-brand-600 px-4 py-3 text-center font-medium text-white hover:bg-brand-700"
        >
          Go to checkout
        </Link>
      </aside>
    </div>
  );
}
