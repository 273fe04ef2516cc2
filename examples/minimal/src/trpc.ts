/** tRPC setup: the context, a procedure that requires a principal, and the idempotency procedures. */

import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '@idem/idempotency/prisma';
import { createIdempotency } from '@idem/idempotency/trpc';
import { initTRPC, TRPCError } from '@trpc/server';
import superjson from 'superjson';
import type { Database } from './db.ts';

export interface Context {
  principal: string | null;
  /** The request's headers (the middleware reads Idempotency-Key). */
  headers: Headers;
  /** Headers to add to the response (Idempotent-Replayed, Retry-After): see `responseMeta` in server.ts. */
  resHeaders: Headers;
  /** The HTTP request carried several operations: an idempotent mutation must travel alone. */
  isBatch: boolean;
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
  return createIdempotency<AuthedContext, PrismaTransactionLike<Database>>({
    store: createPrismaIdempotencyStore(db),
    transformer: superjson, // the router's own: stored results replay byte for byte
    getScope: (ctx) => ctx.principal,
    getRequestHeaders: (ctx) => ctx.headers,
    getResponseHeaders: (ctx) => ctx.resHeaders,
    isBatched: (ctx) => ctx.isBatch,
  });
}
