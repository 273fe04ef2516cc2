'use client';

import { idempotencyHeaders, idempotentRetryLink } from '@idem/idempotency/client';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createTRPCClient, httpBatchLink, httpLink, loggerLink, splitLink } from '@trpc/client';
import type { AnyTRPCProcedure, TRPCRouterRecord } from '@trpc/server';
import { createTRPCContext } from '@trpc/tanstack-react-query';
import { type ReactNode, useState } from 'react';
import superjson from 'superjson';
import type { AppRouter } from '~/server/root';

export const { TRPCProvider, useTRPC, useTRPCClient } = createTRPCContext<AppRouter>();

/** The dotted paths of a router record's queries (`'orders.forIntent'`), nested routers included. */
type QueryPathsOf<TRecord, TPrefix extends string = ''> = {
  [TName in keyof TRecord & string]: TRecord[TName] extends AnyTRPCProcedure
    ? TRecord[TName]['_def']['type'] extends 'query'
      ? `${TPrefix}${TName}`
      : never
    : TRecord[TName] extends TRPCRouterRecord
      ? QueryPathsOf<TRecord[TName], `${TPrefix}${TName}.`>
      : never;
}[keyof TRecord & string];
type QueryPath = QueryPathsOf<AppRouter['_def']['record']>;

/** The queries built on `privateInputProcedure`: the server answers a GET of them with 405. */
const PRIVATE_INPUT_QUERIES: ReadonlySet<string> = new Set(['orders.forIntent'] satisfies QueryPath[]);

function makeQueryClient() {
  return new QueryClient({
    defaultOptions: {
      queries: { staleTime: 30_000 },
      // A mutation is never retried blindly: only a keyed, idempotent one may be (see packages/idempotency).
      mutations: { retry: false },
    },
  });
}

let browserQueryClient: QueryClient | undefined;
function getQueryClient() {
  if (typeof window === 'undefined') return makeQueryClient();
  browserQueryClient ??= makeQueryClient();
  return browserQueryClient;
}

export function TRPCReactProvider({ children }: { children: ReactNode }) {
  const queryClient = getQueryClient();
  const [trpcClient] = useState(() =>
    createTRPCClient<AppRouter>({
      links: [
        loggerLink({
          enabled: (op) =>
            process.env.NODE_ENV === 'development' && op.direction === 'down' && op.result instanceof Error,
        }),
        // Re-sends a keyed mutation after a network error, a 5xx or a 409 (same operation, same key), with
        // capped exponential backoff and jitter; everything else passes through untouched. The router's
        // idempotent mutations (the compiler checks the list against AppRouter) never leave without a key.
        idempotentRetryLink<AppRouter>({ requireKeyFor: { 'checkout.placeOrder': true } }),
        // Mutations travel alone (one operation per HTTP request, so its Idempotency-Key header is its own);
        // queries with private input go as POST (never in a URL); the other queries are batched.
        splitLink({
          condition: (op) => op.type === 'mutation',
          true: httpLink({
            url: '/api/trpc',
            transformer: superjson,
            headers: ({ op }) => idempotencyHeaders(op),
          }),
          false: splitLink({
            condition: (op) => PRIVATE_INPUT_QUERIES.has(op.path),
            true: httpLink({ url: '/api/trpc', transformer: superjson, methodOverride: 'POST' }),
            false: httpBatchLink({ url: '/api/trpc', transformer: superjson }),
          }),
        }),
      ],
    }),
  );
  return (
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
        {children}
      </TRPCProvider>
    </QueryClientProvider>
  );
}
