import { randomUUID } from 'node:crypto';
import { env } from '~/env';
import { placeOrderInput } from '~/lib/schemas';
import { effectIdPerAttempt } from '../fault-points.ts';
import { idempotency } from '../idempotency.ts';
import { orderIdForIntent, placeOrder } from '../services/place-order.ts';
import { createTRPCRouter, principalProcedure } from '../trpc.ts';

export const checkoutRouter = createTRPCRouter({
  /**
   * Requires an Idempotency-Key. External mode: the card charge happens outside this database, so the claim
   * commits first under a lease and the key travels on to the provider (through the order id). Kept as long as
   * money needs (see key-lifetimes.ts): longer than the browser re-sends an intent, no longer than the provider
   * remembers its own key.
   */
  placeOrder: principalProcedure
    .concat(idempotency.external({ retentionSeconds: env.keyLifetimes.serverRetentionHours * 3600 }))
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
