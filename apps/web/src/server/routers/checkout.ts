import { env } from '~/env';
import { placeOrderInput } from '~/lib/schemas';
import { clientAddressOf, clientRefOf } from '../auth/client-address.ts';
import { OrderLimitError } from '../errors.ts';
import type { AppIdempotency } from '../idempotency.ts';
import type { NewOrderLimit } from '../services/new-order-limit.ts';
import { type orderIdForIntent, type PlaceOrderDeps, placeOrder } from '../services/place-order.ts';
import { createTRPCRouter, principalProcedure } from '../trpc.ts';

export interface CheckoutRouterDeps {
  idempotency: AppIdempotency;
  /** Names the order (and so the provider's key) for an intent; the app passes `orderIdForIntent`. */
  orderIdFor: typeof orderIdForIntent;
  /** New orders per principal per window; the app passes `env.newOrderLimit`. */
  newOrderLimit: NewOrderLimit;
  /** The paid order's fulfilment job, in the paying transaction; the app passes `enqueueFulfilmentIn`. */
  enqueueFulfilment: PlaceOrderDeps['enqueueFulfilment'];
}

/** The keyed hash of the request's client address, or null when it has none. */
function clientRefFor(headers: Headers): string | null {
  const address = clientAddressOf(headers, env.proxyHops);
  return address === null ? null : clientRefOf(address, env.SESSION_SECRET);
}

export function createCheckoutRouter({
  idempotency,
  orderIdFor,
  newOrderLimit,
  enqueueFulfilment,
}: CheckoutRouterDeps) {
  return createTRPCRouter({
    /**
     * Requires an Idempotency-Key. External mode: the card charge happens outside this database, so the claim
     * commits first under a lease and the key travels on to the provider (through the order id). Kept as long
     * as money needs (see key-lifetimes.ts): longer than the browser re-sends an intent, no longer than the
     * provider remembers its own key.
     */
    placeOrder: principalProcedure
      .concat(idempotency.external({ retentionSeconds: env.keyLifetimes.serverRetentionHours * 3600 }))
      .input(placeOrderInput)
      .mutation(async ({ ctx, input }) => {
        try {
          return await placeOrder(
            { db: ctx.db, provider: ctx.provider, newOrderLimit, enqueueFulfilment },
            {
              principalId: ctx.principal.id,
              orderId: orderIdFor(ctx.idempotency),
              clientRef: clientRefFor(ctx.headers),
              input,
            },
          );
        } catch (error) {
          if (error instanceof OrderLimitError)
            ctx.resHeaders?.set('Retry-After', String(error.retryAfterSeconds));
          throw error;
        }
      }),
  });
}
