/**
 * The one tRPC setup file: context, initialisation, procedures. `t` stays private to this module.
 */

import { createProviderClient, type PaymentProvider } from '@idem/payments';
import { initTRPC, TRPCError } from '@trpc/server';
import superjson from 'superjson';
import { ZodError, z } from 'zod';
import { env } from '~/env';
import {
  InvalidApiTokenError,
  isAdmin,
  isMintedForThisRequest,
  type Principal,
  resolvePrincipal,
} from './auth/principal.ts';
import { db } from './db.ts';
import { reasonOf } from './errors.ts';
import { errorIdOf } from './observability/log.ts';

export interface CreateContextOptions {
  headers: Headers;
  /** Response headers of the HTTP handler; absent for server-side callers. */
  resHeaders?: Headers;
  /** True when the HTTP request carries several tRPC operations (a batch of more than one). */
  isBatch?: boolean;
  /** True when the response is streamed (`trpc-accept: application/jsonl`, httpBatchStreamLink). */
  isStreamed?: boolean;
  /** The HTTP request's method; absent for server-side callers (no URL to leak anything into). */
  httpMethod?: string;
  deps?: Partial<ContextDeps>;
}

interface ContextDeps {
  db: typeof db;
  provider: PaymentProvider;
}

export async function createTRPCContext(options: CreateContextOptions) {
  const deps: ContextDeps = {
    db: options.deps?.db ?? db,
    provider:
      options.deps?.provider ??
      createProviderClient({ baseUrl: env.PROVIDER_URL, secretKey: env.PROVIDER_SECRET_KEY }),
  };
  let principal: Principal | null = null;
  let principalError: InvalidApiTokenError | null = null;
  try {
    principal = await resolvePrincipal(options.headers, { db: deps.db, sessionSecret: env.SESSION_SECRET });
  } catch (error) {
    if (!(error instanceof InvalidApiTokenError)) throw error;
    principalError = error;
  }
  return {
    ...deps,
    principal,
    principalError,
    /** The principal is a guest session the proxy created for this very request (see `GUEST_MINTED_HEADER`). */
    principalMintedNow: isMintedForThisRequest(principal, options.headers),
    headers: options.headers,
    resHeaders: options.resHeaders,
    isBatch: options.isBatch ?? false,
    isStreamed: options.isStreamed ?? false,
    httpMethod: options.httpMethod ?? null,
  };
}
export type Context = Awaited<ReturnType<typeof createTRPCContext>>;

const t = initTRPC.context<Context>().create({
  transformer: superjson,
  errorFormatter({ shape, error }) {
    const cause = error.cause;
    // No stack traces on the wire: they leak server paths, and they would make a replayed error's body differ
    // from the original's (each is a different Error object).
    const { stack: _stack, ...data } = shape.data;
    // A 5xx says nothing decided and nothing internal (a provider's or the database's message): a generic
    // message and the id of the server's log line that holds the real cause (written by the route's onError).
    if (data.httpStatus >= 500) {
      const errorId = errorIdOf(error);
      return {
        ...shape,
        message: `${genericServerErrorMessage(data.httpStatus)} (error id ${errorId})`,
        data: { code: data.code, httpStatus: data.httpStatus, path: data.path, errorId },
      };
    }
    return {
      ...shape,
      data: {
        ...data,
        // Machine-readable detail for clients: which field failed, or which business rule.
        fieldErrors: cause instanceof ZodError ? z.flattenError(cause).fieldErrors : undefined,
        reason: reasonOf(error),
      },
    };
  },
});

function genericServerErrorMessage(httpStatus: number): string {
  if (httpStatus === 503)
    return 'A service this request needs is unavailable right now; retry later (with the same Idempotency-Key, if it had one)';
  return 'Internal server error';
}

export const createTRPCRouter = t.router;
export const createCallerFactory = t.createCallerFactory;

export const publicProcedure = t.procedure;

/** Requires a principal and narrows `ctx.principal` to non-null for the procedures built on it. */
export const principalProcedure = publicProcedure.use(({ ctx, next }) => {
  if (ctx.principalError) throw new TRPCError({ code: 'UNAUTHORIZED', message: ctx.principalError.message });
  if (!ctx.principal) {
    throw new TRPCError({
      code: 'UNAUTHORIZED',
      message: 'No session: enable cookies, or send Authorization: Bearer <token>.',
    });
  }
  return next({ ctx: { principal: ctx.principal } });
});

/**
 * A query whose input is private (an email address, a card token): sent as POST, never as GET, whose input
 * would travel in the URL — into access logs, proxies and the browser's history. The client sends it with
 * `methodOverride: 'POST'` (src/trpc/react.tsx); a GET of it is refused with 405 before it is read further.
 */
export const privateInputProcedure = principalProcedure.use(({ ctx, next }) => {
  if (ctx.httpMethod === 'GET') {
    throw new TRPCError({
      code: 'METHOD_NOT_SUPPORTED',
      message: 'This query takes private input: send it as POST, not in the URL.',
    });
  }
  return next();
});

/**
 * Admins only (users with role `admin`: an admin API token, or the browser session /admin/login sets).
 * No principal → 401 (from principalProcedure); any other principal, guest or customer → 403.
 */
export const adminProcedure = principalProcedure.use(({ ctx, next }) => {
  if (!isAdmin(ctx.principal)) {
    throw new TRPCError({ code: 'FORBIDDEN', message: 'Admins only.' });
  }
  return next({ ctx: { principal: ctx.principal, admin: ctx.principal } });
});
