/**
 * A browser tab against the REAL server half: `useIdempotentMutation` (or a test-supplied client) over
 * idempotentRetryLink + httpLink (superjson) to a router whose `checkout.placeOrder` uses
 * `idempotency.external()` on this run's Postgres, through tRPC's fetch adapter. The tab's storage survives
 * `reload()`; `loseNextResponse()` lets the server run the mutation and then fails the fetch, so the tab
 * never learns the outcome. Counts the mutation's executions. Used by tests/adversarial/.
 */
import type { Database } from '@idem/db';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { act, cleanup, renderHook } from '@testing-library/react';
import { createTRPCClient, httpLink } from '@trpc/client';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { createTRPCOptionsProxy } from '@trpc/tanstack-react-query';
import { createElement, type ReactNode } from 'react';
import superjson from 'superjson';
import { z } from 'zod';
import { idempotencyHeaders, idempotentRetryLink } from '../src/client/index.ts';
import {
  type IdempotentMutationState,
  type KeyValueStorage,
  type UseIdempotentMutationOptions,
  useIdempotentMutation,
} from '../src/react/index.ts';
import { uniqueScope } from './support/db.ts';
import { createTestTRPC } from './support/trpc.ts';

/** The transformer the harness's link sends with: pass it to the hook as `transformer`. */
export const linkTransformer = superjson;

/** Unmounts every hook mounted by the harness (call after each test). */
export const unmountTabs = cleanup;

/** An input with an optional field, as a checkout form with an empty coupon sends it. */
export const orderInput = z.object({ sku: z.string(), coupon: z.string().optional() });
export type OrderInput = z.infer<typeof orderInput>;

export function memoryStorage(): KeyValueStorage & { items: Map<string, string> } {
  const items = new Map<string, string>();
  return {
    items,
    getItem: (name) => items.get(name) ?? null,
    setItem: (name, value) => {
      items.set(name, value);
    },
    removeItem: (name) => {
      items.delete(name);
    },
  };
}

export function createReloadHarness(db: Database) {
  const { t, idempotency } = createTestTRPC(db);
  let executions = 0;
  const router = t.router({
    checkout: t.router({
      placeOrder: t.procedure
        .concat(idempotency.external())
        .input(orderInput)
        .mutation(({ input }) => {
          executions += 1;
          return { orderNumber: executions, sku: input.sku };
        }),
    }),
  });

  const principal = uniqueScope();
  const statuses: number[] = [];
  let loseNextResponse = false;
  const fetch = async (url: string | URL | Request, init?: RequestInit) => {
    const req = new Request(url, init);
    const response = await fetchRequestHandler({
      endpoint: '/api/trpc',
      req,
      router,
      createContext: ({ req, resHeaders, info }) => ({
        headers: req.headers,
        resHeaders,
        principalId: principal,
        batched: info.calls.length > 1,
      }),
    });
    statuses.push(response.status);
    if (loseNextResponse) {
      loseNextResponse = false;
      throw new TypeError('fetch failed');
    }
    return response;
  };
  // One attempt per submit: a lost response leaves the outcome unknown at once (no waiting out retries).
  const client = createTRPCClient<typeof router>({
    links: [
      idempotentRetryLink({ maxAttempts: 1 }),
      httpLink({
        url: 'http://shop.test/api/trpc',
        transformer: superjson,
        fetch,
        headers: ({ op }) => idempotencyHeaders(op),
      }),
    ],
  });
  const storage = memoryStorage();

  /** Mounts the checkout's hook in this tab; call again (after unmount) for a reload. */
  function mountHook(options: Partial<UseIdempotentMutationOptions> = {}) {
    const queryClient = new QueryClient({ defaultOptions: { mutations: { retry: false } } });
    const trpc = createTRPCOptionsProxy<typeof router>({ client, queryClient });
    const wrapper = ({ children }: { children: ReactNode }) =>
      createElement(QueryClientProvider, { client: queryClient }, children);
    const rendered = renderHook(
      () =>
        useIdempotentMutation((request) => trpc.checkout.placeOrder.mutationOptions({ ...request }), {
          intentId: 'checkout',
          storage,
          ...options,
        }),
      { wrapper },
    );
    const submit = async (input: OrderInput) => {
      let outcome: IdempotentMutationState<unknown, unknown, OrderInput> | undefined;
      await act(async () => {
        outcome = await rendered.result.current.submit(input);
      });
      if (!outcome) throw new Error('submit did not settle');
      return outcome;
    };
    return { ...rendered, submit };
  }

  return {
    client,
    principal,
    storage,
    statuses,
    mountHook,
    executions: () => executions,
    loseNextResponse: () => {
      loseNextResponse = true;
    },
  };
}
