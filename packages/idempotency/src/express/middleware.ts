/**
 * The Express 5 adapter: a middleware in front of a route handler, so that a retried request with the same
 * `Idempotency-Key` runs the handler once and gets the first response back. Mount a body parser
 * (`express.json()`) before it: the body is part of the request's fingerprint.
 *
 *   app.post('/orders', express.json(), idempotency.transactional(), async (req, res) => {
 *     const order = await idempotency.tx(res).order.create(…);
 *     res.status(201).location(`/orders/${order.id}`).json(order);
 *   });
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { bodyTooLargeError } from '../core/errors.ts';
import type { HttpBody } from '../http/fingerprint.ts';
import {
  createHttpGuard,
  type HttpIdempotencyConfig,
  type HttpIdempotencyContext,
  type HttpRoute,
  type HttpRouteOptions,
  type TransactionalHttpContext,
} from '../http/guard.ts';
import { IDEMPOTENCY_KEY_HEADER } from '../protocol.ts';
import { holdResponse } from './capture.ts';

export type CreateExpressIdempotencyConfig<TTx> = HttpIdempotencyConfig<Request, TTx>;

/** A programming error: the handler asked for the key's context on a route without the middleware. */
export class IdempotencyMiddlewareMissingError extends Error {
  override readonly name = 'IdempotencyMiddlewareMissingError';
}

export function createExpressIdempotency<TTx>(config: CreateExpressIdempotencyConfig<TTx>) {
  const guard = createHttpGuard(config);
  /** Each response's context, while its handler runs; nothing is added to `req` or `res.locals`. */
  const contexts = new WeakMap<Response, HttpIdempotencyContext | TransactionalHttpContext<TTx>>();

  function middleware<TContext extends HttpIdempotencyContext>(
    route: HttpRoute<Request, TContext>,
  ): RequestHandler {
    return (req: Request, res: Response, next: NextFunction) => {
      const hold = holdResponse(res);
      route(
        {
          request: req,
          method: req.method,
          path: routePathOf(req),
          pathAndQuery: req.originalUrl,
          keyHeader: req.get(IDEMPOTENCY_KEY_HEADER) ?? null,
          readBody: (maxBytes) => bodyOf(req, maxBytes),
        },
        (idempotency) => {
          contexts.set(res, idempotency);
          const held = hold.capture();
          next();
          return held.answer;
        },
      )
        .then((answer) => hold.send(answer))
        .catch(next);
    };
  }

  function contextOf(res: Response) {
    const context = contexts.get(res);
    if (!context)
      throw new IdempotencyMiddlewareMissingError(
        'No idempotency context on this response: mount idempotency.transactional() or .external() before the handler.',
      );
    return context;
  }

  return {
    /** The claim, the handler's writes (through `tx(res)`) and the stored response commit in one transaction. */
    transactional(options?: HttpRouteOptions): RequestHandler {
      return middleware(guard.transactional(options));
    },
    /** For effects outside the database: forward `context(res).key` to the outside service. */
    external(options?: HttpRouteOptions): RequestHandler {
      return middleware(guard.external(options));
    },
    /** The request's key, scope and fingerprint, in a handler behind either middleware. */
    context(res: Response): HttpIdempotencyContext {
      return contextOf(res);
    },
    /** The transaction of the claim, in a handler behind `transactional()`: write through it. */
    tx(res: Response): TTx {
      const context = contextOf(res);
      if (!('tx' in context))
        throw new IdempotencyMiddlewareMissingError(
          'This route uses idempotency.external(): there is no transaction (use transactional()).',
        );
      return context.tx;
    },
  };
}

/**
 * The route's path as Express matches it, for the default route name: the matched route's pattern
 * (`/orders/:id/pay`) under its mount path when the middleware is mounted on the route, else the path as sent;
 * lower-cased unless the app routes case-sensitively, and without a trailing slash unless it routes strictly.
 * `/orders`, `/orders/` and `/ORDERS` reach one handler, so they are one key space: the same key sent to another
 * of them is refused with 422 (the literal target stays in the fingerprint), never run again.
 */
function routePathOf(req: Request): string {
  const pattern: unknown = req.route?.path;
  let path = `${req.baseUrl}${typeof pattern === 'string' ? pattern : req.path}`;
  if (!req.app.get('case sensitive routing')) path = path.toLowerCase();
  if (!req.app.get('strict routing')) path = path.replace(/(?<=.)\/+$/, '');
  return path;
}

/**
 * The parsed body `express.json()` (or `express.raw()`, `express.text()`) left on `req`, refused (413) past
 * `maxBytes` by its Content-Length or, for raw and text bodies, its length. The parser's own `limit` (100 kB by
 * default) already bounded what it read.
 */
function bodyOf(req: Request, maxBytes: number): HttpBody {
  if (Number(req.get('content-length')) > maxBytes) throw bodyTooLargeError(maxBytes);
  const body: unknown = req.body;
  if (body === undefined) {
    if (hasBody(req))
      throw new TypeError(
        'The request has a body but req.body is undefined: mount a body parser (express.json()) before the ' +
          'idempotency middleware, so the body is part of the fingerprint.',
      );
    return { kind: 'none' };
  }
  const bytes =
    body instanceof Uint8Array ? body : typeof body === 'string' ? Buffer.from(body, 'utf8') : null;
  if (bytes) {
    if (bytes.length > maxBytes) throw bodyTooLargeError(maxBytes);
    return { kind: 'bytes', bytes, contentType: req.get('content-type') ?? null };
  }
  return { kind: 'json', value: body };
}

function hasBody(req: Request): boolean {
  const length = req.get('content-length');
  return req.get('transfer-encoding') !== undefined || (length !== undefined && length !== '0');
}
