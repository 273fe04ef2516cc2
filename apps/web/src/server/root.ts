import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
import { env } from '~/env';
import { adminRouter } from './routers/admin.ts';
import { benchRouter } from './routers/bench.ts';
import { catalogRouter } from './routers/catalog.ts';
import { checkoutRouter } from './routers/checkout.ts';
import { ordersRouter } from './routers/orders.ts';
import { createCallerFactory, createTRPCRouter } from './trpc.ts';

export const appRouter = createTRPCRouter({
  admin: adminRouter,
  catalog: catalogRouter,
  checkout: checkoutRouter,
  orders: ordersRouter,
  // Benchmark-only (IDEM_BENCH_ROUTES=1, apps/bench/src/run.ts): absent from the router otherwise.
  ...(env.IDEM_BENCH_ROUTES === '1' ? { bench: benchRouter } : {}),
});

export type AppRouter = typeof appRouter;
export type RouterInputs = inferRouterInputs<AppRouter>;
export type RouterOutputs = inferRouterOutputs<AppRouter>;

export const createCaller = createCallerFactory(appRouter);
