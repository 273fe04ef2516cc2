/** The tRPC API over HTTP: body cap, context, the streamed-response status, and the log line of every 5xx. */
import { type AnyTRPCRouter, type inferRouterContext, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { getHTTPStatusCodeFromError } from '@trpc/server/http';
import { limitBody } from '~/server/http/limit-body';
import { type AppIdempotency, idempotency as appIdempotency } from '~/server/idempotency';
import { errorIdOf, logger } from '~/server/observability/log';
import { traceRequest } from '~/server/observability/tracing';
import { type Context, createTRPCContext } from '~/server/trpc';

/** A router built on the app's tRPC instance: its context is the app's (and its error formatter too). */
type AppContextRouter = AnyTRPCRouter & { _def: { _config: { $types: { ctx: Context } } } };

/**
 * The largest request body the API reads. A checkout (≤ 50 lines, an email, a card token) is under 10 kB; this
 * leaves room for any batch of queries; nothing larger is read, parsed or fingerprinted.
 */
const MAX_BODY_BYTES = 64 * 1024;

/**
 * The HTTP handler of the tRPC API for `router` (the route passes the router it serves; tests pass routers of
 * their own built on the same tRPC instance, to see what a failure looks like on the wire). `idempotency` is
 * the middleware instance the router's idempotent procedures were built with (the app's unless given).
 */
export function createTrpcHandler<TRouter extends AppContextRouter>(
  router: TRouter,
  { idempotency = appIdempotency }: { idempotency?: AppIdempotency } = {},
) {
  // TRouter's context IS Context (the constraint above); TypeScript cannot resolve that for a generic.
  const createContext = (options: Parameters<typeof createTRPCContext>[0]) =>
    createTRPCContext(options) as Promise<inferRouterContext<TRouter>>;
  return (incoming: Request) => traceRequest(incoming, () => handler(incoming));

  function handler(incoming: Request) {
    // Past the cap, tRPC's own PAYLOAD_TOO_LARGE: a 413 in its error shape, as its Node adapter's maxBodySize.
    const req = limitBody(
      incoming,
      MAX_BODY_BYTES,
      () =>
        new TRPCError({
          code: 'PAYLOAD_TOO_LARGE',
          message: `The request body is larger than ${MAX_BODY_BYTES} bytes.`,
        }),
    );
    return fetchRequestHandler({
      endpoint: '/api/trpc',
      req,
      router,
      createContext: ({ resHeaders, info }) =>
        createContext({
          headers: req.headers,
          resHeaders,
          isBatch: info.calls.length > 1,
          isStreamed: info.accept === 'application/jsonl',
          httpMethod: req.method,
        }),
      // Queries may come as POST (`privateInputProcedure`: their input must not be in a URL).
      allowMethodOverride: true,
      // A streamed response that calls an idempotent procedure: HTTP 400, like the refusal inside it.
      responseMeta: (opts) => idempotency.streamedResponseMeta(opts),
      // Every 5xx: one log line with the real cause, under the id its (generic) response body carries.
      onError({ error, path }) {
        if (getHTTPStatusCodeFromError(error) < 500) return;
        logger.error(
          { errorId: errorIdOf(error), path: path ?? null, code: error.code, err: error.cause ?? error },
          'request failed',
        );
      },
    });
  }
}
