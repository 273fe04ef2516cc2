import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { appRouter } from '~/server/root';
import { createTRPCContext } from '~/server/trpc';

function handler(req: Request) {
  return fetchRequestHandler({
    endpoint: '/api/trpc',
    req,
    router: appRouter,
    createContext: ({ resHeaders, info }) =>
      createTRPCContext({ headers: req.headers, resHeaders, isBatch: info.calls.length > 1 }),
    onError({ error, path }) {
      if (error.code === 'INTERNAL_SERVER_ERROR')
        console.error(`[trpc] ${path ?? '<no path>'}:`, error.cause ?? error);
    },
  });
}

export { handler as GET, handler as POST };
