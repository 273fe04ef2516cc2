/**
 * The Fetch-API adapter: wraps a `(request: Request) => Response` handler — a Next.js route handler, a Hono
 * route (`c.req.raw`), Deno, Bun, anything on web standards — so that a retried request with the same
 * `Idempotency-Key` runs it once and gets the first response back.
 *
 *   const idempotency = createFetchIdempotency({ store, getScope: (request) => principalOf(request) });
 *   export const POST = idempotency.transactional(async (request, { tx }) => Response.json(…, { status: 201 }));
 */

import { type HttpAnswer, hasNullBody } from '../http/answer.ts';
import {
  createHttpGuard,
  type HttpIdempotencyConfig,
  type HttpIdempotencyContext,
  type HttpRoute,
  type HttpRouteOptions,
  type TransactionalHttpContext,
} from '../http/guard.ts';
import { IDEMPOTENCY_KEY_HEADER } from '../protocol.ts';

export type CreateFetchIdempotencyConfig<TTx> = HttpIdempotencyConfig<Request, TTx>;

/** A web-standard handler; `TArgs` are whatever the framework passes after the request (Next.js: `{ params }`). */
export type FetchHandler<TContext, TArgs extends unknown[]> = (
  request: Request,
  idempotency: TContext,
  ...args: TArgs
) => Response | Promise<Response>;

export function createFetchIdempotency<TTx>(config: CreateFetchIdempotencyConfig<TTx>) {
  const guard = createHttpGuard(config);
  return {
    /** `idempotency.tx` is the transaction holding the claim: the handler's writes commit with the response. */
    transactional<TArgs extends unknown[] = []>(
      handler: FetchHandler<TransactionalHttpContext<TTx>, TArgs>,
      options?: HttpRouteOptions,
    ) {
      return wrap(guard.transactional(options), handler);
    },
    /** For effects outside the database: forward `idempotency.key` to the outside service. */
    external<TArgs extends unknown[] = []>(
      handler: FetchHandler<HttpIdempotencyContext, TArgs>,
      options?: HttpRouteOptions,
    ) {
      return wrap(guard.external(options), handler);
    },
  };
}

function wrap<TContext, TArgs extends unknown[]>(
  route: HttpRoute<Request, TContext>,
  handler: FetchHandler<TContext, TArgs>,
): (request: Request, ...args: TArgs) => Promise<Response> {
  return async (request, ...args) => {
    // The handler reads the original; the fingerprint reads a copy of the body.
    const copy = request.clone();
    const url = new URL(request.url);
    const answer = await route(
      {
        request,
        method: request.method,
        path: url.pathname,
        pathAndQuery: `${url.pathname}${url.search}`,
        keyHeader: request.headers.get(IDEMPOTENCY_KEY_HEADER),
        readBody: async () => ({
          kind: 'bytes',
          bytes: new Uint8Array(await copy.arrayBuffer()),
          contentType: request.headers.get('content-type'),
        }),
      },
      async (idempotency) => answerOf(await handler(request, idempotency, ...args)),
    );
    return responseOf(answer);
  };
}

async function answerOf(response: Response): Promise<HttpAnswer> {
  return {
    status: response.status,
    headers: [...response.headers],
    body: new Uint8Array(await response.arrayBuffer()),
  };
}

function responseOf(answer: HttpAnswer): Response {
  const headers = new Headers();
  for (const [name, value] of answer.headers) headers.append(name, value);
  return new Response(hasNullBody(answer.status) ? null : answer.body, { status: answer.status, headers });
}
