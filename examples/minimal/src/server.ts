/** The HTTP server: tRPC's standalone adapter on node:http, the API under /trpc/. */
import type { IncomingHttpHeaders } from 'node:http';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { principalOf } from './auth.ts';
import type { Database } from './db.ts';
import { createAppRouter } from './router.ts';
import type { Context } from './trpc.ts';

export function createServer(db: Database) {
  return createHTTPServer({
    basePath: '/trpc/',
    router: createAppRouter(db),
    createContext: ({ req, info }): Context => {
      const headers = toHeaders(req.headers);
      return {
        principal: principalOf(headers.get('authorization')),
        headers,
        resHeaders: new Headers(),
        isBatch: info.calls.length > 1,
      };
    },
    // The node adapter hands the context no response headers: the middleware's go out through responseMeta.
    responseMeta: ({ ctx }) => ({ headers: ctx?.resHeaders }),
  });
}

function toHeaders(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    for (const item of Array.isArray(value) ? value : value === undefined ? [] : [value])
      headers.append(name, item);
  }
  return headers;
}
