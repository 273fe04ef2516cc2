import { orderIdInput } from '~/lib/schemas';
import { getOrderForPrincipal, listOrdersForPrincipal } from '../services/orders.ts';
import { createTRPCRouter, principalProcedure } from '../trpc.ts';

export const ordersRouter = createTRPCRouter({
  byId: principalProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => getOrderForPrincipal(ctx.db, ctx.principal.id, input.id)),
  list: principalProcedure.query(({ ctx }) => listOrdersForPrincipal(ctx.db, ctx.principal.id)),
});
