import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
import { env } from '~/env';
import { idempotency } from './idempotency.ts';
import { enqueueFulfilmentIn } from './jobs.ts';
import { adminRouter } from './routers/admin.ts';
import { catalogRouter } from './routers/catalog.ts';
import { type CheckoutRouterDeps, createCheckoutRouter } from './routers/checkout.ts';
import { ordersRouter } from './routers/orders.ts';
import { orderIdForIntent } from './services/place-order.ts';
import { createCallerFactory, createTRPCRouter } from './trpc.ts';

/** What the app's router is built from; the app passes its production dependencies (`appRouter` below). */
export type AppRouterDeps = CheckoutRouterDeps;

export function createAppRouter(deps: AppRouterDeps) {
  return createTRPCRouter({
    admin: adminRouter,
    catalog: catalogRouter,
    checkout: createCheckoutRouter(deps),
    orders: ordersRouter,
  });
}

export const appRouter = createAppRouter({
  idempotency,
  orderIdFor: orderIdForIntent,
  newOrderLimit: env.newOrderLimit,
  enqueueFulfilment: enqueueFulfilmentIn,
});

export type AppRouter = typeof appRouter;
export type RouterInputs = inferRouterInputs<AppRouter>;
export type RouterOutputs = inferRouterOutputs<AppRouter>;

export const createCaller = createCallerFactory(appRouter);
