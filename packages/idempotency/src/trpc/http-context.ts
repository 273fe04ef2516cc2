/**
 * The HTTP half of an idempotent request's context, for tRPC's adapters: the request headers as `Headers`
 * (the Node adapters hand over `IncomingHttpHeaders`), the headers to add to the response, and whether the
 * request is a batch or a stream. Spread it into the app's `createContext` result.
 */
import type { TRPCRequestInfo } from '@trpc/server/http';

export interface IdempotencyHttpContext {
  /** The request's headers (where `Idempotency-Key` is read). */
  headers: Headers;
  /**
   * Where the middleware sets `Idempotent-Replayed` and `Retry-After`: the fetch adapter's own `resHeaders`,
   * or (Node adapters, which have none) a fresh `Headers` that `responseMeta` copies to the response.
   */
  resHeaders: Headers;
  /** The HTTP request carried several operations. */
  isBatch: boolean;
  /** The response is streamed (`trpc-accept: application/jsonl`). */
  isStreamed: boolean;
}

/** Node's `IncomingHttpHeaders`, structurally (no `node:http` import). */
export type NodeRequestHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface HttpContextOptions {
  /** The adapter's request: a fetch `Request`, or Node's `IncomingMessage`. */
  req: { headers: Headers | NodeRequestHeaders };
  /** The fetch adapter's response headers; the Node adapters have none. */
  resHeaders?: Headers | undefined;
  info: TRPCRequestInfo;
}

/**
 *   createContext: (opts) => ({ ...idempotencyHttpContext(opts), principal: … })
 *
 * With any tRPC adapter (fetch, Next.js route handler, standalone, Express…); pair it with
 * `responseMeta: (opts) => idempotency.responseMeta(opts)`.
 */
export function idempotencyHttpContext({
  req,
  resHeaders,
  info,
}: HttpContextOptions): IdempotencyHttpContext {
  return {
    headers: req.headers instanceof Headers ? req.headers : toHeaders(req.headers),
    resHeaders: resHeaders ?? new Headers(),
    isBatch: info.calls.length > 1,
    isStreamed: info.accept === 'application/jsonl',
  };
}

function toHeaders(incoming: NodeRequestHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    for (const item of typeof value === 'string' ? [value] : value) headers.append(name, item);
  }
  return headers;
}
