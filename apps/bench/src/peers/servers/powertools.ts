/**
 * (e) `@aws-lambda-powertools/idempotency` 2.35.0 with its Redis persistence. In 2.35.0 that layer is
 * `CachePersistenceLayer` (subpath `/cache`, a connected `@redis/client` passed in) — there is no
 * `RedisPersistenceLayer` export. The library wraps Lambda handlers, so node:http turns each request into an API
 * Gateway-style event `{ httpMethod, path, headers, body }` plus a synthetic Lambda context, and writes back the
 * handler's `{ statusCode, headers, body }`. `makeIdempotent` as its README shows it for a Lambda handler, with
 * `IdempotencyConfig({ eventKeyJmesPath: 'headers."idempotency-key"' })`; other options are defaults (1 h
 * expiry, md5, no local cache).
 *
 * Errors: a Lambda would throw them (API Gateway answers 502); this server maps the two the library documents
 * for duplicates to what the other contenders answer — IdempotencyAlreadyInProgressError → 409 + Retry-After: 1,
 * IdempotencyValidationError → 422 — and anything else to 500.
 *
 * Two more routes exist for the correctness probes only (never timed):
 * - `/validated` adds the documented payload validation (`payloadValidationJmesPath: 'body'`);
 * - `/function-form` wraps a plain `(event) => …` function, the README's "any other arbitrary function" form,
 *   without `registerLambdaContext`, so its in-progress records carry no in-progress expiry.
 */
import { createServer, type IncomingMessage } from 'node:http';
import {
  IdempotencyAlreadyInProgressError,
  IdempotencyConfig,
  IdempotencyValidationError,
  makeIdempotent,
} from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import type { Database } from '@idem/db';
import { createClient } from '@redis/client';
import { parseInput, runEffect } from '../effect.ts';
import { readBody, sendJson } from '../http.ts';
import type { StartServer } from './types.ts';

interface HttpEvent {
  httpMethod: string;
  path: string;
  headers: Record<string, string | undefined>;
  body: string;
}

interface HttpResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

/** What `makeIdempotent` reads from a Lambda context: the remaining time bounds an in-progress record. */
interface LambdaContextLike {
  getRemainingTimeInMillis(): number;
}

/** A Lambda's budget per invocation: 30 s, API Gateway's integration timeout order of magnitude. */
const lambdaContext: LambdaContextLike = { getRemainingTimeInMillis: () => 30_000 };

function toEvent(request: IncomingMessage, body: string): HttpEvent {
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(request.headers))
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  return { httpMethod: request.method ?? 'POST', path: request.url ?? '/', headers, body };
}

/** The Lambda handler: the shared effect, answered as an API Gateway proxy result. */
function lambdaHandler(db: Database) {
  return async (event: HttpEvent): Promise<HttpResult> => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(event.body) as unknown;
    } catch {
      parsed = undefined;
    }
    const input = parseInput(parsed);
    if (!input) throw new Error('body must be {"n": <int>}');
    const effect = await runEffect(db, input.n);
    return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(effect) };
  };
}

export const startPowertools: StartServer = async ({ db, redisUrl, keyPrefix }) => {
  const client = await createClient({ url: redisUrl }).connect();
  const handler = lambdaHandler(db);
  const keyConfig = () => new IdempotencyConfig({ eventKeyJmesPath: 'headers."idempotency-key"' });

  // One persistence layer per wrapped function: a layer is configured once, by its first IdempotencyConfig.
  const asLambda = makeIdempotent((event: HttpEvent, _context: LambdaContextLike) => handler(event), {
    persistenceStore: new CachePersistenceLayer({ client }),
    config: keyConfig(),
    keyPrefix: `${keyPrefix}powertools`,
  });
  const validated = makeIdempotent((event: HttpEvent, _context: LambdaContextLike) => handler(event), {
    persistenceStore: new CachePersistenceLayer({ client }),
    config: new IdempotencyConfig({
      eventKeyJmesPath: 'headers."idempotency-key"',
      payloadValidationJmesPath: 'body',
    }),
    keyPrefix: `${keyPrefix}powertools-validated`,
  });
  const functionForm = makeIdempotent((event: HttpEvent) => handler(event), {
    persistenceStore: new CachePersistenceLayer({ client }),
    config: keyConfig(),
    keyPrefix: `${keyPrefix}powertools-function`,
  });
  const routes: Record<string, (event: HttpEvent) => Promise<HttpResult>> = {
    '/effect': (event) => asLambda(event, lambdaContext),
    '/validated': (event) => validated(event, lambdaContext),
    '/function-form': (event) => functionForm(event),
  };

  // Without a Lambda context the library warns on every call; that form is only probed, keep stderr readable.
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].startsWith('Could not determine remaining time left')) return;
    warn(...args);
  };

  const server = createServer((request, response) => {
    void (async () => {
      const route = request.method === 'POST' ? routes[request.url ?? ''] : undefined;
      if (!route) return sendJson(response, 404, '{"error":"not found"}');
      const event = toEvent(request, await readBody(request));
      try {
        const result = await route(event);
        response.writeHead(result.statusCode, result.headers);
        response.end(result.body);
      } catch (error) {
        if (error instanceof IdempotencyAlreadyInProgressError)
          return sendJson(response, 409, JSON.stringify({ error: error.name }), { 'retry-after': '1' });
        if (error instanceof IdempotencyValidationError)
          return sendJson(response, 422, JSON.stringify({ error: error.name }));
        const name = error instanceof Error ? error.name : 'Error';
        sendJson(response, 500, JSON.stringify({ error: name }));
      }
    })();
  });
  return {
    server,
    close: async () => {
      client.destroy();
    },
  };
};
