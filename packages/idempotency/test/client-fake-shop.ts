/**
 * A real tRPC router behind a `fetch` stub, for the client-side tests: httpLink talks HTTP to
 * `fetchRequestHandler`, so responses have real status codes and headers. The shop emulates the server's
 * idempotency contract in memory (store per key, replay with `Idempotent-Replayed: true`, 422 on a different
 * payload, 409 + Retry-After while in flight, 5xx releases the key) and can inject faults: a request that never
 * arrives, a response that is lost after the server ran the mutation, a 5xx, a 409, a declined card.
 */
import { httpLink, type TRPCLink } from '@trpc/client';
import { initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import superjson from 'superjson';
import { z } from 'zod';
import { idempotencyHeaders } from '../src/client/index.ts';
import type { MarkedIdempotent } from '../src/trpc/index.ts';

export type Fault =
  /** fetch rejects before the server sees the request. */
  | 'drop-request'
  /** the server runs the request, then fetch rejects: the client never learns the outcome. */
  | 'drop-response'
  /** 503 SERVICE_UNAVAILABLE (transient; the key is released). */
  | 503
  /** 500 with a non-JSON body, as a proxy's error page. */
  | 'html-500'
  /** 409 CONFLICT + Retry-After (the same key in flight). */
  | 409
  /** 402 PAYMENT_REQUIRED, stored and replayed. */
  | 402
  /** 422 UNPROCESSABLE_CONTENT (out of stock), stored and replayed. */
  | 422;

interface Context {
  key: string | null;
  resHeaders: Headers;
}

const orderInput = z.object({
  items: z.array(z.object({ sku: z.string(), quantity: z.number().int().positive() })),
  email: z.string(),
});
export type OrderInput = z.infer<typeof orderInput>;
export interface Order {
  id: number;
  email: string;
  total: number;
}

export function createFakeShop(options: { retryAfter?: string } = {}) {
  const t = initTRPC.context<Context>().create({
    transformer: superjson,
    isDev: false,
    errorFormatter: ({ shape }) => ({
      ...shape,
      data: { code: shape.data.code, httpStatus: shape.data.httpStatus },
    }),
  });
  /** Faults applied to the next requests, in order (one per HTTP request). */
  const faults: Fault[] = [];
  /** Every HTTP request that reached fetch. */
  const requests: Array<{ path: string; key: string | null; input: unknown }> = [];
  const stored = new Map<string, { fingerprint: string; outcome: { order: Order } | { error: TRPCError } }>();
  let executions = 0;
  let queries = 0;
  let pendingFault: Fault | undefined;

  // placeOrder emulates an idempotent procedure, so its type carries the mark the real builders give.
  const emulatedIdempotent = t.procedure as MarkedIdempotent<typeof t.procedure>;
  const router = t.router({
    checkout: t.router({
      placeOrder: emulatedIdempotent.input(orderInput).mutation(({ ctx, input }): Order => {
        if (!ctx.key) throw new TRPCError({ code: 'BAD_REQUEST', message: 'Idempotency-Key missing' });
        const fingerprint = JSON.stringify(input);
        const previous = stored.get(ctx.key);
        if (previous) {
          if (previous.fingerprint !== fingerprint)
            throw new TRPCError({
              code: 'UNPROCESSABLE_CONTENT',
              message: 'key reused with another payload',
            });
          ctx.resHeaders.set('Idempotent-Replayed', 'true');
          if ('error' in previous.outcome) throw previous.outcome.error;
          return previous.outcome.order;
        }
        const fault = pendingFault;
        if (fault === 503) throw new TRPCError({ code: 'SERVICE_UNAVAILABLE', message: 'provider down' });
        if (fault === 409) {
          ctx.resHeaders.set('Retry-After', options.retryAfter ?? '1');
          throw new TRPCError({ code: 'CONFLICT', message: 'in progress' });
        }
        if (fault === 402 || fault === 422) {
          const error =
            fault === 402
              ? new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Card declined' })
              : new TRPCError({ code: 'UNPROCESSABLE_CONTENT', message: 'Out of stock' });
          stored.set(ctx.key, { fingerprint, outcome: { error } });
          throw error;
        }
        executions += 1;
        const order = { id: executions, email: input.email, total: input.items.length * 100 };
        stored.set(ctx.key, { fingerprint, outcome: { order } });
        return order;
      }),
      // A mutation that is not idempotent on the server: always runs.
      subscribeNewsletter: t.procedure.input(z.object({ email: z.string() })).mutation(() => {
        if (pendingFault === 503) throw new TRPCError({ code: 'SERVICE_UNAVAILABLE', message: 'down' });
        return 'ok';
      }),
      ping: t.procedure.query(() => {
        queries += 1;
        if (pendingFault === 503) throw new TRPCError({ code: 'SERVICE_UNAVAILABLE', message: 'down' });
        return 'pong';
      }),
    }),
  });

  const fetch = async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(url, init);
    const key = request.headers.get('Idempotency-Key');
    const path = new URL(request.url).pathname.replace('/api/trpc/', '');
    const body = request.method === 'POST' ? await request.clone().text() : '';
    requests.push({ path, key, input: body ? superjson.deserialize(JSON.parse(body)) : undefined });
    const fault = faults.shift();
    if (fault === 'drop-request') throw new TypeError('fetch failed');
    if (fault === 'html-500')
      return new Response('<html>Bad gateway</html>', {
        status: 500,
        headers: { 'content-type': 'text/html' },
      });
    pendingFault = fault;
    try {
      const response = await fetchRequestHandler({
        endpoint: '/api/trpc',
        req: request,
        router,
        createContext: ({ resHeaders }) => ({ key, resHeaders }),
      });
      if (fault === 'drop-response') throw new TypeError('fetch failed');
      return response;
    } finally {
      pendingFault = undefined;
    }
  };

  /** The terminating link, as the app configures it for mutations. */
  const terminatingLink = (): TRPCLink<typeof router> =>
    httpLink({
      url: 'http://shop.test/api/trpc',
      transformer: superjson,
      fetch,
      headers: ({ op }) => idempotencyHeaders(op),
    });

  return {
    router,
    fetch,
    faults,
    requests,
    terminatingLink,
    get executions() {
      return executions;
    },
    get queries() {
      return queries;
    },
    /** Requests that carried this procedure path. */
    requestsTo: (path: string) => requests.filter((request) => request.path === path),
  };
}

export type FakeShopRouter = ReturnType<typeof createFakeShop>['router'];

export const anOrder: OrderInput = { items: [{ sku: 'TEA', quantity: 1 }], email: 'a@example.com' };

/** A sleep that records the delays and returns at once. */
export function recordingSleep() {
  const delays: number[] = [];
  const sleep = (ms: number) => {
    delays.push(ms);
    return Promise.resolve();
  };
  return { delays, sleep };
}
