/** tRPC setup: the context, a procedure that requires a principal, and the idempotency procedures. */

import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { createIdempotency, type IdempotencyHttpContext } from '@idem/idempotency/trpc';
import { initTRPC, TRPCError } from '@trpc/server';
import superjson from 'superjson';
import type { Database } from './db.ts';

/** The principal, and the HTTP half the middleware reads (headers in and out, batch, stream): server.ts. */
export interface Context extends IdempotencyHttpContext {
  principal: string | null;
}
type AuthedContext = Context & { principal: string };

// isDev false: no stack trace in error bodies, so a replayed error is byte-identical to the first one.
const t = initTRPC.context<Context>().create({ transformer: superjson, isDev: false });

export const router = t.router;

export const authedProcedure = t.procedure.use(({ ctx, next }) => {
  if (!ctx.principal)
    throw new TRPCError({ code: 'UNAUTHORIZED', message: 'Send Authorization: Bearer <token>.' });
  return next({ ctx: { principal: ctx.principal } });
});

export function createIdempotencyProcedures(db: Database) {
  return createIdempotency({
    store: createPrismaIdempotencyStore(db), // ctx.idempotency.tx: this client's transaction type
    transformer: superjson, // the router's own: stored results replay byte for byte
    getScope: (ctx: AuthedContext) => ctx.principal, // the context type, inferred from this annotation
    getRequestHeaders: (ctx) => ctx.headers,
    getResponseHeaders: (ctx) => ctx.resHeaders,
    isBatched: (ctx) => ctx.isBatch,
    isStreamed: (ctx) => ctx.isStreamed,
  });
}
