/**
 * HTTP layer: routing, mapping results and errors onto responses, and applying the test knobs.
 * Handlers return a `Reply` instead of writing to the response, so latency and dropped responses can be
 * applied uniformly after the work (and its commit) is done.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { bearerAuth } from './auth.ts';
import { readRequestBody } from './body.ts';
import {
  assertKnownSource,
  createCharge,
  getCharge,
  listChargesByOrder,
  parseChargeParams,
  type StoredResponse,
} from './charges.ts';
import { type Pool, type PoolClient, withTransaction } from './db.ts';
import { ApiError, invalidRequest } from './errors.ts';
import { type EventsFilter, listEvents, type Outbox } from './events.ts';
import { fingerprint, keyScope, parseIdempotencyKey, runIdempotent } from './idempotency.ts';
import { type Knobs, KnobUpdateSchema } from './knobs.ts';
import { createRefund, parseRefundParams } from './refunds.ts';
import type { WebhookDispatcher } from './webhooks.ts';

export interface AppDeps {
  pool: Pool;
  secretKey: string;
  /** Present only when test knobs are enabled; otherwise /__knobs and /__webhooks are 404s. */
  knobs: Knobs | undefined;
  /** Where new events are queued for delivery (webhookUrl undefined: recorded only). */
  outbox: Outbox;
  /** The delivery loop, when a webhook URL is configured (used by POST /__webhooks/flush). */
  webhooks: WebhookDispatcher | undefined;
  log: (line: string) => void;
}

interface Reply {
  status: number;
  /** Already serialized: stored idempotent responses are sent back byte for byte. */
  body: string;
  headers?: Record<string, string>;
  /** Test knob dropResponseNext: destroy the socket instead of answering. */
  drop?: boolean;
}

const json = (status: number, value: unknown, headers?: Record<string, string>): Reply => ({
  status,
  body: JSON.stringify(value),
  ...(headers === undefined ? {} : { headers }),
});

function notFound(method: string, path: string): ApiError {
  return new ApiError(404, 'invalid_request_error', `Unrecognized request URL (${method}: ${path}).`);
}

function methodNotAllowed(method: string, path: string, allowed: readonly string[]): ApiError {
  return new ApiError(
    405,
    'invalid_request_error',
    `Method ${method} is not allowed on ${path}.`,
    {},
    { Allow: allowed.join(', ') },
  );
}

const CHARGE_PATH = /^\/v1\/charges\/([^/]+)$/;

export function createRequestListener(deps: AppDeps): RequestListener {
  const authenticate = bearerAuth(deps.secretKey);
  const scope = keyScope(deps.secretKey);

  async function route(req: IncomingMessage, method: string, url: URL): Promise<Reply> {
    const path = url.pathname;

    if (path === '/health') {
      if (method !== 'GET') throw methodNotAllowed(method, path, ['GET']);
      return json(200, { ok: true });
    }

    if (deps.knobs !== undefined) {
      if (path === '/__knobs') return knobsRoute(req, method, path, deps.knobs);
      if (path === '/__webhooks') {
        if (method !== 'GET') throw methodNotAllowed(method, path, ['GET']);
        const charge = url.searchParams.get('charge');
        const { events } = await listEvents(deps.pool, {
          limit: 1000,
          ...(charge === null ? {} : { charge }),
        });
        return json(200, { object: 'list', data: events });
      }
      if (path === '/__charges/held') {
        if (method !== 'GET') throw methodNotAllowed(method, path, ['GET']);
        return heldChargesRoute(url, deps.knobs);
      }
      if (path === '/__charges/release') {
        if (method !== 'POST') throw methodNotAllowed(method, path, ['POST']);
        return json(200, { released: deps.knobs.charges.release() });
      }
      if (path === '/__webhooks/flush') {
        if (method !== 'POST') throw methodNotAllowed(method, path, ['POST']);
        return flushRoute(req, deps.webhooks);
      }
    }

    if (path === '/v1' || path.startsWith('/v1/')) {
      // Authenticate before revealing anything, including which /v1 paths exist.
      authenticate(req.headers.authorization);

      if (path === '/v1/charges') {
        if (method === 'POST') return postCharge(req);
        if (method === 'GET') {
          const order = url.searchParams.get('order');
          if (order === null || order === '')
            throw invalidRequest('Missing required param: order.', { param: 'order' });
          return json(200, { object: 'list', data: await listChargesByOrder(deps.pool, order) });
        }
        throw methodNotAllowed(method, path, ['GET', 'POST']);
      }

      if (path === '/v1/events') {
        if (method !== 'GET') throw methodNotAllowed(method, path, ['GET']);
        const { events, hasMore } = await listEvents(deps.pool, parseEventsQuery(url));
        return json(200, { object: 'list', data: events, has_more: hasMore });
      }

      if (path === '/v1/refunds') {
        if (method === 'POST') return postRefund(req);
        throw methodNotAllowed(method, path, ['POST']);
      }

      const match = CHARGE_PATH.exec(path);
      if (match?.[1] !== undefined) {
        if (method !== 'GET') throw methodNotAllowed(method, path, ['GET']);
        const id = safeDecode(match[1]);
        const charge = id === undefined ? undefined : await getCharge(deps.pool, id);
        if (charge === undefined) {
          throw new ApiError(404, 'invalid_request_error', `No such charge: '${id ?? match[1]}'`, {
            code: 'resource_missing',
            param: 'id',
          });
        }
        return json(200, charge);
      }
    }

    throw notFound(method, path);
  }

  async function postCharge(req: IncomingMessage): Promise<Reply> {
    // Everything that can be a 400 is checked before the key is claimed: rejected requests are never stored.
    const key = parseIdempotencyKey(req.headersDistinct['idempotency-key']);
    const params = parseChargeParams(await readRequestBody(req));
    assertKnownSource(params.source);

    if (deps.knobs?.takeFailure()) {
      // Before any database work: the simulated outage neither charges nor claims the key.
      throw new ApiError(500, 'api_error', 'Simulated provider failure (test knob failNext).');
    }

    const reply = await execute(key, fingerprint(params), (client) =>
      createCharge(client, params, deps.outbox),
    );
    // Taken only once the call produced its (committed) response, so a 422/409/500 does not use up a drop.
    if (deps.knobs?.takeDrop()) reply.drop = true;
    return reply;
  }

  async function postRefund(req: IncomingMessage): Promise<Reply> {
    const key = parseIdempotencyKey(req.headersDistinct['idempotency-key']);
    const params = parseRefundParams(await readRequestBody(req));
    // The endpoint is part of the fingerprint: a key first used for a charge cannot be reused for a refund.
    return execute(key, fingerprint({ endpoint: 'POST /v1/refunds', params }), (client) =>
      createRefund(client, params, deps.outbox),
    );
  }

  /**
   * Runs a write in one transaction, under the Idempotency-Key when there is one (claim, write, event, outbox and
   * stored response commit together; a replay runs nothing, so it records no second event).
   */
  async function execute(
    key: string | undefined,
    requestFingerprint: string,
    write: (client: PoolClient) => Promise<StoredResponse>,
  ): Promise<Reply> {
    if (key === undefined) return { ...(await withTransaction(deps.pool, write)) };
    const outcome = await runIdempotent(deps.pool, { scope, key, fingerprint: requestFingerprint }, write);
    return {
      ...outcome.response,
      ...(outcome.kind === 'replayed' ? { headers: { 'Idempotent-Replayed': 'true' } } : {}),
    };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://provider.invalid');

    let reply: Reply;
    try {
      reply = await route(req, method, url);
    } catch (err) {
      reply = errorReply(err, `${method} ${url.pathname}`, deps.log);
    }

    // Latency and the hold apply after the work has committed: the classic "charged, but the response was late".
    if (deps.knobs !== undefined && method === 'POST' && url.pathname === '/v1/charges') {
      const delay = deps.knobs.latencyMs;
      if (delay > 0) await sleep(delay);
      await deps.knobs.charges.pass();
    }

    if (reply.drop) {
      req.socket.destroy(); // Simulated lost response: the charge exists, the client never hears about it.
      return;
    }
    if (res.destroyed || res.headersSent) return; // The client went away meanwhile.
    res.writeHead(reply.status, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(reply.body),
      'Cache-Control': 'no-store',
      ...reply.headers,
    });
    res.end(reply.body);
  }

  return (req, res) => {
    handle(req, res).catch((err: unknown) => {
      // Last resort (e.g. writing to a broken socket): never leave an unhandled rejection behind.
      deps.log(`provider: failed to answer ${req.method ?? ''} ${req.url ?? ''}: ${describe(err)}`);
      if (!res.headersSent) res.destroy();
    });
  };
}

async function knobsRoute(req: IncomingMessage, method: string, path: string, knobs: Knobs): Promise<Reply> {
  if (method === 'GET') return json(200, knobs.snapshot());
  if (method === 'DELETE') return json(200, knobs.reset());
  if (method === 'POST') {
    const body = await readRequestBody(req);
    const result = KnobUpdateSchema.safeParse(body.kind === 'json' ? body.value : undefined);
    if (!result.success) {
      const issue = result.error.issues[0];
      const param = issue?.path.map(String).join('.') ?? '';
      throw invalidRequest(
        `Invalid knobs: ${issue?.message ?? 'expected a JSON object'} ${param === '' ? '' : `(${param})`}`.trim(),
        param === '' ? {} : { param },
      );
    }
    return json(200, knobs.set(result.data));
  }
  throw methodNotAllowed(method, path, ['GET', 'POST', 'DELETE']);
}

const HELD_WAIT_MAX_MS = 60_000;

/**
 * `GET /__charges/held?atLeast=N[&timeoutMs=T]`: answers once at least N charge responses are held (200
 * `{ held }`), or 408 `{ held }` after T ms (default and maximum 60 s). Without atLeast it answers at once.
 */
async function heldChargesRoute(url: URL, knobs: Knobs): Promise<Reply> {
  const atLeast = integerParam(url, 'atLeast', 0, 1_000);
  const timeoutMs = integerParam(url, 'timeoutMs', HELD_WAIT_MAX_MS, HELD_WAIT_MAX_MS);
  const reached = await knobs.charges.whenHeld(atLeast, timeoutMs);
  return json(reached ? 200 : 408, { held: knobs.charges.held });
}

function integerParam(url: URL, name: string, fallback: number, max: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null) return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > max) {
    throw invalidRequest(`Invalid ${name}: must be an integer from 0 to ${max}.`, { param: name });
  }
  return value;
}

const FlushSchema = z.strictObject({ order: z.enum(['forward', 'reverse']).default('forward') });

async function flushRoute(req: IncomingMessage, webhooks: WebhookDispatcher | undefined): Promise<Reply> {
  const body = await readRequestBody(req);
  const result = FlushSchema.safeParse(body.kind === 'json' ? body.value : undefined);
  if (!result.success) {
    throw invalidRequest('Invalid flush: expected { "order": "forward" | "reverse" }.', { param: 'order' });
  }
  if (webhooks === undefined) {
    throw invalidRequest(
      'No webhook URL is configured (PROVIDER_WEBHOOK_URL / webhookUrl): nothing to flush.',
    );
  }
  return json(200, { object: 'list', data: await webhooks.flush(result.data.order) });
}

const EVENTS_MAX_LIMIT = 100;

const EVENTS_QUERY_PARAMS = new Set(['charge', 'limit', 'delivery_success', 'created[gte]']);

/**
 * `GET /v1/events?charge=ch_…&delivery_success=false&created[gte]=<unix s>&limit=n`: the newest `limit` (default
 * and maximum 100) that match.
 */
function parseEventsQuery(url: URL): EventsFilter {
  for (const name of url.searchParams.keys()) {
    if (!EVENTS_QUERY_PARAMS.has(name))
      throw invalidRequest(`Received unknown parameter: ${name}`, { param: name });
  }
  const charge = url.searchParams.get('charge');
  if (charge === '') throw invalidRequest('Invalid charge: must not be empty.', { param: 'charge' });
  const rawLimit = url.searchParams.get('limit');
  const limit = rawLimit === null ? EVENTS_MAX_LIMIT : Number(rawLimit);
  if (!/^\d+$/.test(rawLimit ?? '1') || limit < 1 || limit > EVENTS_MAX_LIMIT) {
    throw invalidRequest(`Invalid limit: must be an integer from 1 to ${EVENTS_MAX_LIMIT}.`, {
      param: 'limit',
    });
  }
  const rawSuccess = url.searchParams.get('delivery_success');
  if (rawSuccess !== null && rawSuccess !== 'true' && rawSuccess !== 'false') {
    throw invalidRequest('Invalid delivery_success: must be true or false.', { param: 'delivery_success' });
  }
  const rawCreatedGte = url.searchParams.get('created[gte]');
  if (rawCreatedGte !== null && !/^\d{1,12}$/.test(rawCreatedGte)) {
    throw invalidRequest('Invalid created[gte]: must be a Unix timestamp in seconds.', {
      param: 'created[gte]',
    });
  }
  return {
    limit,
    ...(charge === null ? {} : { charge }),
    ...(rawSuccess === null ? {} : { deliverySuccess: rawSuccess === 'true' }),
    ...(rawCreatedGte === null ? {} : { createdGte: Number(rawCreatedGte) }),
  };
}

function errorReply(err: unknown, what: string, log: (line: string) => void): Reply {
  if (err instanceof ApiError) return json(err.status, err.toBody(), { ...err.headers });
  log(`provider: ${what} failed: ${describe(err)}`);
  return json(500, { error: { type: 'api_error', message: 'An unexpected error occurred. Please retry.' } });
}

function describe(err: unknown): string {
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}

function safeDecode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
