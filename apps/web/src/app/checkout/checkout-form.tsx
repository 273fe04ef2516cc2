'use client';

import { useMutation } from '@tanstack/react-query';
import Link from 'next/link';
import { useRouter } from 'next/navigation';
import { type FormEvent, useState } from 'react';
import { usePricedCart } from '~/components/use-priced-cart';
import { formatMoney } from '~/lib/money';
import { placeOrderInput, TEST_CARD_TOKENS } from '~/lib/schemas';
import { useTRPC } from '~/trpc/react';

export function CheckoutForm() {
  const trpc = useTRPC();
  const router = useRouter();
  const { cart, lines, currency, subtotalCents, isLoading } = usePricedCart();
  const [email, setEmail] = useState('');
  const [cardToken, setCardToken] = useState<string>(TEST_CARD_TOKENS[0].token);
  const [formError, setFormError] = useState<string | null>(null);
  // One key per purchase attempt: reused if the same payment is retried, replaced once the server gave a
  // definite answer. (The full intent-key hook with reload/back-button survival is packages/idempotency/react.)
  const [idempotencyKey, setIdempotencyKey] = useState(() => crypto.randomUUID());

  const placeOrder = useMutation(
    trpc.checkout.placeOrder.mutationOptions({
      trpc: { context: { idempotencyKey } },
      onSuccess(order) {
        cart.clear();
        router.push(`/orders/${order.id}?placed=1`);
      },
      onError(error) {
        const status = error.data?.httpStatus;
        // A stored business answer (declined, out of stock) is final for this key: the next attempt is a new one.
        if (status !== undefined && status >= 400 && status < 500 && status !== 409) {
          setIdempotencyKey(crypto.randomUUID());
        }
      },
    }),
  );

  if (isLoading) return <p className="text-stone-500">Loading your cart…</p>;
  if (lines.length === 0 && !placeOrder.isSuccess) {
    return (
      <p>
        Your cart is empty.{' '}
        <Link href="/" className="text-brand-700 underline">
          Browse the shop
        </Link>
      </p>
    );
  }

  function onSubmit(event: FormEvent) {
    event.preventDefault();
    setFormError(null);
    const parsed = placeOrderInput.safeParse({
      items: lines.map(({ product, quantity }) => ({ sku: product.sku, quantity })),
      email,
      cardToken,
    });
    if (!parsed.success) {
      setFormError(parsed.error.issues[0]?.message ?? 'Check the form.');
      return;
    }
    placeOrder.mutate(parsed.data);
  }

  const busy = placeOrder.isPending || placeOrder.isSuccess;
  const errorMessage = formError ?? placeOrder.error?.message ?? null;

  return (
    <div className="grid gap-8 lg:grid-cols-[1fr_320px]">
      <form
        onSubmit={onSubmit}
        noValidate
        className="rounded-2xl border border-stone-200 bg-white p-6"
        aria-busy={busy}
      >
        <h1 className="text-2xl font-semibold">Checkout</h1>
        <fieldset disabled={busy} className="mt-6 space-y-5">
          <div>
            <label htmlFor="email" className="block text-sm font-medium">
              Email for the receipt
            </label>
            <input
              id="email"
              name="email"
              type="email"
              autoComplete="email"
              required
              value={email}
              onChange={(event) => setEmail(event.target.value)}
              className="mt-1 w-full rounded-lg border border-stone-300 px-3 py-2"
              placeholder="you@example.com"
            />
          </div>
          <div>
            <label htmlFor="card" className="block text-sm font-medium">
              Test card
            </label>
            <select
              id="card"
              name="card"
              value={cardToken}
              onChange={(event) => setCardToken(event.target.value)}
              className="mt-1 w-full rounded-lg border border-stone-300 bg-white px-3 py-2"
            >
              {TEST_CARD_TOKENS.map((card) => (
                <option key={card.token} value={card.token}>
                  {card.label} — {card.token}
                </option>
              ))}
            </select>
            <p className="mt-1 text-xs text-stone-500">
              Test mode: tokens stand in for card numbers, as in Stripe.
            </p>
          </div>
        </fieldset>
        {errorMessage && (
          <p
            role="alert"
            data-testid="checkout-error"
            className="mt-5 rounded-lg border border-red-200 bg-red-50 px-4 py-3 text-sm text-red-800"
          >
            {errorMessage}
          </p>
        )}
        <button
          type="submit"
          disabled={busy}
          className="mt-6 w-full rounded-lg bg-brand-600 px-4 py-3 font-medium text-white hover:bg-brand-700 disabled:cursor-wait disabled:bg-brand-600/60"
        >
          {busy ? 'Processing payment…' : `Pay ${formatMoney(subtotalCents, currency)}`}
        </button>
      </form>
      <aside className="h-fit rounded-2xl border border-stone-200 bg-white p-6">
        <h2 className="font-semibold">Order summary</h2>
        <ul className="mt-4 space-y-2 text-sm">
          {lines.map(({ product, quantity }) => (
            <li key={product.sku} className="flex justify-between gap-4">
              <span>
                {quantity} × {product.name}
              </span>
              <span>{formatMoney(product.priceCents * quantity, product.currency)}</span>
            </li>
          ))}
        </ul>
        <p className="mt-4 flex justify-between border-t border-stone-200 pt-4 font-semibold">
          <span>Total</span>
          <span>{formatMoney(subtotalCents, currency)}</span>
        </p>
      </aside>
    </div>
  );
}
