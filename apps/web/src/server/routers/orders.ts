import { z } from 'zod';
import { orderIdInput } from '~/lib/schemas';
import { findOrderForIntent, getOrderForPrincipal, listOrdersForPrincipal } from '../services/orders.ts';
import { createTRPCRouter, principalProcedure, privateInputProcedure } from '../trpc.ts';

/** An intent's key (as the Idempotency-Key header allows it) and the payload the browser sent under it. */
const intentLookupInput = z.object({
  key: z.string().regex(/^[\x20-\x7e]{1,255}$/, 'The key is 1–255 printable ASCII characters.'),
  payload: z.unknown(),
});

export const ordersRouter = createTRPCRouter({
  byId: principalProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => getOrderForPrincipal(ctx.db, ctx.principal.id, input.id)),
  list: principalProcedure.query(({ ctx }) => listOrdersForPrincipal(ctx.db, ctx.principal.id)),
  /**
   * The order (if any) that one of the caller's checkout intents made: see `findOrderForIntent`. Its input is
   * the payment's payload (the receipt email): POST only.
   */
  forIntent: privateInputProcedure
    .input(intentLookupInput)
    .query(({ ctx, input }) => findOrderForIntent(ctx.db, ctx.principal.id, input)),
});
