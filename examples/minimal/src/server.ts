/** The HTTP server: tRPC's standalone adapter on node:http, the API under /trpc/. */
import { idempotencyHttpContext } from '@idem/idempotency/trpc';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { principalOf } from './auth.ts';
import type { Database } from './db.ts';
import { createAppRouter } from './router.ts';
import type { Context } from './trpc.ts';

export function createServer(db: Database) {
  const { router, idempotency } = createAppRouter(db);
  return createHTTPServer({
    basePath: '/trpc/',
    router,
    createContext: (opts): Context => {
      const http = idempotencyHttpContext(opts); // Node's headers → Headers, batch and stream flags
      return { ...http, principal: principalOf(http.headers.get('authorization')) };
    },
    // The node adapter hands the context no response headers: the middleware's go out through responseMeta.
    responseMeta: idempotency.responseMeta,
  });
}
