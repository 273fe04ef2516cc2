/**
 * (c) `@node-idempotency/core` with `@node-idempotency/storage-adapter-redis`, as its README describes the core
 * flow: `onRequest` before the handler (throws on conflict / mismatch, returns the cached response for a seen
 * key), the handler, then `await onResponse` to store the result. Options are the library's defaults (24 h TTL,
 * no waiting for an in-flight duplicate) except the Redis key prefix. Errors map to HTTP exactly as the
 * library's own Express plugin maps them (@node-idempotency/shared `idempotency2HttpCodeMap`): in progress →
 * 409 + Retry-After: 1, fingerprint mismatch → 422, key too long / missing → 400.
 */
import { createServer } from 'node:http';
import {
  Idempotency,
  IdempotencyError,
  IdempotencyErrorCodes,
  type IdempotencyParams,
} from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { type Effect, parseInput, runEffect } from '../effect.ts';
import { parseJson, readBody, sendJson } from '../http.ts';
import type { StartServer } from './types.ts';

const httpStatusOf: Record<IdempotencyErrorCodes, number> = {
  [IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH]: 422,
  [IdempotencyErrorCodes.IDEMPOTENCY_KEY_LEN_EXEEDED]: 400,
  [IdempotencyErrorCodes.IDEMPOTENCY_KEY_MISSING]: 400,
  [IdempotencyErrorCodes.REQUEST_IN_PROGRESS]: 409,
};

export const startNodeIdempotency: StartServer = async ({ db, redisUrl, keyPrefix }) => {
  const storage = new RedisStorageAdapter({ url: redisUrl });
  await storage.connect();
  const idempotency = new Idempotency(storage, { cacheKeyPrefix: `${keyPrefix}node-idempotency` });

  const server = createServer((request, response) => {
    void (async () => {
      if (request.method !== 'POST' || request.url !== '/effect')
        return sendJson(response, 404, '{"error":"not found"}');
      const body = parseJson(await readBody(request));
      const input = parseInput(body);
      if (!input) return sendJson(response, 400, '{"error":"body must be {\\"n\\": <int>}"}');
      const params: IdempotencyParams = {
        headers: request.headers,
        body: body as Record<string, unknown>,
        path: request.url,
        method: request.method,
      };
      let cached: Awaited<ReturnType<typeof idempotency.onRequest<Effect, string>>>;
      try {
        cached = await idempotency.onRequest<Effect, string>(params);
      } catch (error) {
        if (!(error instanceof IdempotencyError)) return sendJson(response, 500, '{"error":"store failed"}');
        const retryAfter: Record<string, string> =
          error.code === IdempotencyErrorCodes.REQUEST_IN_PROGRESS ? { 'retry-after': '1' } : {};
        return sendJson(
          response,
          httpStatusOf[error.code] ?? 500,
          JSON.stringify({ error: error.code }),
          retryAfter,
        );
      }
      if (cached) {
        const status = Number(cached.additional?.statusCode ?? 200);
        const replayed = cached.body === undefined ? { error: cached.error } : cached.body;
        return sendJson(response, status, JSON.stringify(replayed), { 'idempotent-replayed': 'true' });
      }
      try {
        const effect = await runEffect(db, input.n);
        await idempotency.onResponse<Effect, string>(params, {
          body: effect,
          additional: { statusCode: 200 },
        });
        sendJson(response, 200, JSON.stringify(effect));
      } catch {
        // What the library's Express plugin does with a failed request: store the error as the key's answer.
        await idempotency
          .onResponse<Effect, string>(params, { error: 'handler failed', additional: { statusCode: 500 } })
          .catch(() => undefined);
        sendJson(response, 500, '{"error":"handler failed"}');
      }
    })();
  });
  return { server, close: () => storage.disconnect() };
};
