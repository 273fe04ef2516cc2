/**
 * The checkout's real tRPC route on loopback HTTP, beside a CONTROL: the same service behind the same principal
 * procedure WITHOUT the idempotency middleware. An unprotected handler has nothing to derive an order id from, so
 * every control call is a new order (a fresh UUID). Both talk to a provider of their own (test knobs on).
 */
import { randomUUID } from 'node:crypto';
import { startProvider } from '@idem/provider';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { placeOrderInput } from '~/lib/schemas';
import { type LoopbackServer, serveOnLoopback } from './loopback-http.ts';

export interface CheckoutServers {
  provider: Awaited<ReturnType<typeof startProvider>>;
  app: LoopbackServer;
  control: LoopbackServer;
  /** The route's POST handler itself, for requests that loopback HTTP cannot carry. */
  routePOST: (request: Request) => Promise<Response>;
  close(): Promise<void>;
}

export async function startCheckoutServers(
  databaseUrl: string,
  { webhooks = false }: { webhooks?: boolean } = {},
): Promise<CheckoutServers> {
  // With `webhooks`, the provider delivers its events to the app's webhook route (imported on first delivery,
  // once the environment below is set).
  const webhookServer = webhooks
    ? await serveOnLoopback({
        POST: async (request) => (await import('~/app/api/webhooks/provider/route')).POST(request),
      })
    : undefined;
  const provider = await startProvider({
    databaseUrl,
    port: 0,
    testKnobs: true,
    ...(webhookServer ? { webhookUrl: `${webhookServer.url}/api/webhooks/provider` } : {}),
  });
  // The app reads its environment once, at first import: point it at our provider before importing it.
  process.env.PROVIDER_URL = provider.url;
  const route = await import('~/app/api/trpc/[trpc]/route');
  const app = await serveOnLoopback({ GET: route.GET, POST: route.POST });

  const { createTRPCContext, createTRPCRouter, principalProcedure } = await import('~/server/trpc');
  const { placeOrder } = await import('~/server/services/place-order');
  const { env } = await import('~/env');
  const { enqueueFulfilmentIn } = await import('~/server/jobs');
  const unprotectedRouter = createTRPCRouter({
    checkout: createTRPCRouter({
      placeOrder: principalProcedure.input(placeOrderInput).mutation(({ ctx, input }) =>
        placeOrder(
          {
            db: ctx.db,
            provider: ctx.provider,
            newOrderLimit: env.newOrderLimit,
            enqueueFulfilment: enqueueFulfilmentIn,
          },
          { principalId: ctx.principal.id, orderId: randomUUID(), clientRef: null, input },
        ),
      ),
    }),
  });
  const controlHandler = (req: Request) =>
    fetchRequestHandler({
      endpoint: '/api/trpc',
      req,
      router: unprotectedRouter,
      createContext: ({ resHeaders, info }) =>
        createTRPCContext({ headers: req.headers, resHeaders, isBatch: info.calls.length > 1 }),
    });
  const control = await serveOnLoopback({ GET: controlHandler, POST: controlHandler });

  const appDb = await import('~/server/db');
  return {
    provider,
    app,
    control,
    routePOST: route.POST,
    async close() {
      await app.close();
      await control.close();
      await provider.close();
      await webhookServer?.close();
      await appDb.db.$disconnect();
    },
  };
}
