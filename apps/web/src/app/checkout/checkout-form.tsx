'use client';

import { useIdempotentMutation } from '@idem/idempotency/react';
import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { useRouter } from 'next/navigation';
import { type FormEvent, useEffect, useState } from 'react';
import superjson from 'superjson';
import { type PricedCart, usePricedCart } from '~/components/use-priced-cart';
import { formatMoney } from '~/lib/money';
import { type PlaceOrderInput, placeOrderInput, TEST_CARD_TOKENS } from '~/lib/schemas';
import { useTRPC } from '~/trpc/react';
import { announcePayment } from './payment-announcement';
import { PaymentLiveRegions } from './payment-live-regions';
import { type IntentOutcome, PaymentStatus } from './payment-status';
import { forgetPlacedOrder, rememberPlacedOrder, usePlacedOrder } from './placed-order';

/**
 * The purchase intent is the cart, and the cart lives in localStorage (shared by the browser's tabs), so the
 * intent's key lives there too: a double click, a retry, a reload, back-and-resubmit and a second tab paying
 * the same cart all send the same key, and the server charges once. Named per owner (`intentOwner`): another
 * person on the same browser never sees this one's payment in doubt, nor its email.
 */
const CHECKOUT_INTENT = 'checkout';
const intentStorage = () => (typeof window === 'undefined' ? null : window.localStorage);

const HOUR_MS = 3_600_000;

export function CheckoutForm({
  browserIntentHours,
  intentOwner,
}: {
  /** How long an unresolved payment is re-sent; past it the form asks the server what became of it. */
  browserIntentHours: number;
  /** Whose intent this is (`intentOwnerOf` the request's principal): the intent's name ends with it. */
  intentOwner: string;
}) {
  const trpc = useTRPC();
  const router = useRouter();
  const { cart, lines, currency, subtotalCents, isLoading } = usePricedCart();
  // What was paid for, kept for the summary: the cart is emptied on success, before the order page opens.
  const [paidFor, setPaidFor] = useState<Pick<PricedCart, 'lines' | 'currency' | 'subtotalCents'> | null>(
    null,
  );
  const placedOrderId = usePlacedOrder();
  const [email, setEmail] = useState('');
  const [cardToken, setCardToken] = useState<string>(TEST_CARD_TOKENS[0].token);
  const [formError, setFormError] = useState<string | null>(null);

  const pay = useIdempotentMutation(
    (request) =>
      trpc.checkout.placeOrder.mutationOptions({
        ...request,
        onSuccess(order) {
          rememberPlacedOrder(order.id);
          setPaidFor({ lines, currency, subtotalCents });
          cart.clear();
          router.push(`/orders/${order.id}?placed=1`);
        },
      }),
    {
      intentId: `${CHECKOUT_INTENT}:${intentOwner}`,
      storage: intentStorage(),
      // The links' transformer: the hook then means by "the same payment" exactly what the server does.
      transformer: superjson,
      maxIntentAgeMs: browserIntentHours * HOUR_MS,
    },
  );
  const intentCheck = useUnsentIntentCheck(pay);

  // Filling the form again after a reload that interrupted a payment: show what was being paid.
  const inDoubtEmail = pay.inDoubt?.payload.email;
  useEffect(() => {
    if (inDoubtEmail) setEmail((current) => current || inDoubtEmail);
  }, [inDoubtEmail]);

  const announcement = announcePayment({
    state: pay.state,
    inDoubt: pay.inDoubt !== null,
    inFlightElsewhere: pay.inFlightElsewhere,
    unsent: intentCheck,
  });
  const liveRegions = <PaymentLiveRegions announcement={announcement} />;

  if (isLoading)
    return (
      <>
        {liveRegions}
        <p className="text-stone-500">Loading your cart…</p>
      </>
    );
  if (lines.length === 0 && pay.state.status === 'idle') {
    return (
      <>
        {liveRegions}
        {placedOrderId ? (
          <div
            className="rounded-2xl border border-stone-200 bg-white p-8 text-center"
            data-testid="already-placed"
          >
            <h1 className="text-xl font-semibold">Your order has been placed</h1>
            <p className="mt-2 text-stone-600">You were charged once. Your cart is empty now.</p>
            <div className="mt-4 flex justify-center gap-6">
              <Link href={`/orders/${placedOrderId}`} className="text-brand-700 underline">
                View your order
              </Link>
              <Link href="/" onClick={forgetPlacedOrder} className="text-brand-700 underline">
                Continue shopping
              </Link>
            </div>
          </div>
        ) : (
          <p>
            Your cart is empty.{' '}
            <Link href="/" className="text-brand-700 underline">
              Browse the shop
            </Link>
          </p>
        )}
      </>
    );
  }

  async function onSubmit(event: FormEvent) {
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
    // A second submit while one is in flight shares its promise; no second request leaves the browser.
    await pay.submit(parsed.data);
  }

  const { status } = pay.state;
  const busy =
    status === 'sending' || status === 'retrying' || status === 'succeeded' || status === 'replayed';
  // Too old to re-send: the only way on is "start a new purchase", once the customer has seen what happened.
  const expired = intentCheck?.reason === 'expired';
  const announced = pay.inFlightElsewhere ? 'in-other-tab' : expired ? 'expired' : status;
  const summary = paidFor ?? { lines, currency, subtotalCents };
  // The in-other-tab panel already shows the progress line's words: there it is only read out.
  const errorMessage =
    formError ?? (status === 'failed' ? (pay.state.error?.message ?? 'Payment failed.') : null);

  return (
    <>
      {liveRegions}
      <div className="grid gap-8 lg:grid-cols-[1fr_320px]">
        <form
          onSubmit={onSubmit}
          noValidate
          className="rounded-2xl border border-stone-200 bg-white p-6"
          aria-busy={busy}
        >
          <h1 className="text-2xl font-semibold">Checkout</h1>
          {pay.inFlightElsewhere ? (
            <PaymentStatus.InOtherTab />
          ) : intentCheck?.reason === 'expired' ? (
            <PaymentStatus.Expired outcome={intentCheck.outcome} onStartOver={() => pay.reset()} />
          ) : intentCheck?.reason === 'unresolved' ? (
            <PaymentStatus.StillChecking
              outcome={intentCheck.outcome}
              busy={busy}
              onCheck={() => void pay.submit(pay.inDoubt?.payload ?? (pay.state.input as PlaceOrderInput))}
              onStartOver={() => pay.reset()}
            />
          ) : (
            (pay.inDoubt || status === 'unknown') && (
              <PaymentStatus.InDoubt
                busy={busy}
                onCheck={() => void pay.submit(pay.inDoubt?.payload ?? (pay.state.input as PlaceOrderInput))}
                onStartOver={() => pay.reset()}
              />
            )
          )}
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
            disabled={busy || expired}
            className="mt-6 w-full rounded-lg bg-brand-600 px-4 py-3 font-medium text-white hover:bg-brand-700 disabled:cursor-wait disabled:bg-stone-200 disabled:text-stone-700"
          >
            <PaymentStatus.ButtonLabel
              name={announcement.name}
              state={pay.state}
              total={formatMoney(subtotalCents, currency)}
            />
          </button>
          {/* The progress in words, for the eye (the live region reads it); another tab's panel says it above. */}
          <p
            aria-hidden="true"
            data-testid="payment-progress-shown"
            className="mt-3 min-h-5 text-sm text-stone-700"
          >
            {announcement.name === 'in-other-tab' ? '' : announcement.progress}
          </p>
          {/* The state's raw name, for scripts and tests: not shown, not announced. */}
          <p hidden data-testid="payment-status">
            {announced}
          </p>
        </form>
        <aside className="h-fit rounded-2xl border border-stone-200 bg-white p-6">
          <h2 className="font-semibold">Order summary</h2>
          <ul className="mt-4 space-y-2 text-sm">
            {summary.lines.map(({ product, quantity }) => (
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
            <span>{formatMoney(summary.subtotalCents, summary.currency)}</span>
          </p>
        </aside>
      </div>
    </>
  );
}

/**
 * For a payment this form will not simply re-send — too old (`inDoubt.expired`, or a submit that ended
 * `expired`) or unresolved (the server holds another payment under its key) — asks the server which order that
 * intent made, by its key and the payload it was sent with, and nothing else. Null for any other payment.
 */
function useUnsentIntentCheck(pay: {
  key: string | null;
  inDoubt: { payload: PlaceOrderInput; expired: boolean } | null;
  state: { status: string; input: PlaceOrderInput | undefined };
}): { reason: 'expired' | 'unresolved'; outcome: IntentOutcome } | null {
  const trpc = useTRPC();
  const reason =
    pay.inDoubt?.expired === true || pay.state.status === 'expired'
      ? 'expired'
      : pay.state.status === 'unresolved'
        ? 'unresolved'
        : null;
  const payload = pay.inDoubt?.payload ?? pay.state.input;
  const lookup = useQuery({
    ...trpc.orders.forIntent.queryOptions({ key: pay.key ?? '', payload }),
    // Without a readable payload, the key alone can still name the order (the server's stored fingerprint).
    enabled: reason !== null && pay.key !== null,
    staleTime: Number.POSITIVE_INFINITY,
  });
  if (!reason) return null;
  if (lookup.isError)
    return {
      reason,
      outcome: { kind: 'error', message: 'We could not check your order right now. Reload to try again.' },
    };
  if (!lookup.data) return { reason, outcome: { kind: 'checking' } };
  const { order } = lookup.data;
  return { reason, outcome: order ? { kind: 'order', orderId: order.id } : { kind: 'none' } };
}
