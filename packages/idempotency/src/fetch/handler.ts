/**
 * The Fetch-API adapter: wraps a `(request: Request) => Response` handler — a Next.js route handler, a Hono
 * route (`c.req.raw`), Deno, Bun, anything on web standards — so that a retried request with the same
 * `Idempotency-Key` runs it once and gets the first response back.
 *
 *   const idempotency = createFetchIdempotency({ store, getScope: (request) => principalOf(request) });
 *   export const POST = idempotency.transactional(async (request, { tx }) => Response.json(…, { status: 201 }));
 */

import { bodyTooLargeError } from '../core/errors.ts';
import { type HttpAnswer, hasNullBody } from '../http/answer.ts';
import { type HttpBody, hashBytes, isJsonContentType } from '../http/fingerprint.ts';
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
        readBody: (maxBytes) => readCapped(copy, maxBytes, () => request.body?.cancel().catch(() => {})),
      },
      async (idempotency) => answerOf(await handler(request, idempotency, ...args)),
    );
    return responseOf(answer);
  };
}

/**
 * Reads at most `maxBytes` of the body: a declared or actual length past it is refused (413) without reading
 * further, and both copies of the body are then cancelled (`abandon`: the handler will not run). A JSON body is
 * kept for its canonical form; any other is hashed chunk by chunk and not kept.
 */
async function readCapped(copy: Request, maxBytes: number, abandon: () => void): Promise<HttpBody> {
  const contentType = copy.headers.get('content-type');
  const refuse = (reader?: ReadableStreamDefaultReader<Uint8Array>) => {
    // Not awaited: a tee'd branch's cancel settles only once the other branch is cancelled too.
    void reader?.cancel().catch(() => {});
    abandon();
    return bodyTooLargeError(maxBytes);
  };
  if (Number(copy.headers.get('content-length')) > maxBytes) throw refuse();
  const json = isJsonContentType(contentType);
  const hashed = json ? null : hashBytes();
  const chunks: Uint8Array[] = [];
  let length = 0;
  const reader = copy.body?.getReader();
  while (reader) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.length;
    if (length > maxBytes) throw refuse(reader);
    if (hashed) hashed.update(value);
    else chunks.push(value);
  }
  if (hashed) return hashed.body();
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return { kind: 'bytes', bytes, contentType };
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
