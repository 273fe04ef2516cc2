import { randomUUID } from 'node:crypto';
import { placeOrderInput } from '~/lib/schemas';
import { effectIdPerAttempt } from '../fault-points.ts';
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
        // effectIdPerAttempt: a test-only CONTROL switch (IDEM_TEST_HOOKS=1), false in production.
        orderId: effectIdPerAttempt ? randomUUID() : orderIdForIntent(ctx.idempotency),
        input,
      }),
    ),
});
