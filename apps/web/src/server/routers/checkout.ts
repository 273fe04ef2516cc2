import { placeOrderInput } from '~/lib/schemas';
import { idempotency } from '../idempotency.ts';
import { orderIdForIntent, placeOrder } from '../services/place-order.ts';
import { createTRPCRouter, principalProcedure } from '../trpc.ts';

export const checkoutRouter = createTRPCRouter({
  /**
   * Requires an Idempotency-Key. External mode: the card charge happens outside this database, so the claim
   * commits first under a lease and the key travels on to the provider (through the order id).
   */
  placeOrder: principalProcedure
    .concat(idempotency.external())
    .input(placeOrderInput)
    .mutation(({ ctx, input }) =>
      placeOrder(ctx, {
        principalId: ctx.principal.id,
        orderId: orderIdForIntent(ctx.idempotency),
        input,
      }),
    ),
});
