'use client';

import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createTRPCClient, httpBatchLink, httpLink, loggerLink, splitLink } from '@trpc/client';
import { createTRPCContext } from '@trpc/tanstack-react-query';
import { type ReactNode, useState } from 'react';
import superjson from 'superjson';
import type { AppRouter } from '~/server/root';

export const { TRPCProvider, useTRPC, useTRPCClient } = createTRPCContext<AppRouter>();

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
        // Mutations travel alone (one operation per HTTP request, so per-request headers stay per-operation);
        // queries are batched.
        splitLink({
          condition: (op) => op.type === 'mutation',
          true: httpLink({
            url: '/api/trpc',
            transformer: superjson,
            // A mutation made with `trpc: { context: { idempotencyKey } }` carries its key as the header.
            headers: ({ op }) => {
              const key = op.context.idempotencyKey;
              return typeof key === 'string' ? { 'Idempotency-Key': key } : {};
            },
          }),
          false: httpBatchLink({ url: '/api/trpc', transformer: superjson }),
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
