import { placeOrderInput } from '~/lib/schemas';
import { placeOrder } from '../services/place-order.ts';
import { createTRPCRouter, principalProcedure } from '../trpc.ts';

export const checkoutRouter = createTRPCRouter({
  placeOrder: principalProcedure
    .input(placeOrderInput)
    .mutation(({ ctx, input }) => placeOrder(ctx, ctx.principal.id, input)),
});
