import { listProducts } from '../services/catalog.ts';
import { createTRPCRouter, publicProcedure } from '../trpc.ts';

export const catalogRouter = createTRPCRouter({
  list: publicProcedure.query(({ ctx }) => listProducts(ctx.db)),
});
