import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
import { catalogRouter } from './routers/catalog.ts';
import { checkoutRouter } from './routers/checkout.ts';
import { ordersRouter } from './routers/orders.ts';
import { createCallerFactory, createTRPCRouter } from './trpc.ts';

export const appRouter = createTRPCRouter({
  catalog: catalogRouter,
  checkout: checkoutRouter,
  orders: ordersRouter,
});

export type AppRouter = typeof appRouter;
export type RouterInputs = inferRouterInputs<AppRouter>;
export type RouterOutputs = inferRouterOutputs<AppRouter>;

export const createCaller = createCallerFactory(appRouter);
