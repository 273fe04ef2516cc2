/**
 * Structured logs (pino, JSON lines on stdout). One line per idempotent request: procedure, mode, outcome,
 * latency and a hash of the key — never the raw key, never the stored body. One line per 5xx, with its cause
 * and the `errorId` its response body carries.
 */
import type { IdempotencyEvent } from '@idem/idempotency/trpc';
import pino from 'pino';

const cache = globalThis as unknown as { idemLogger?: pino.Logger };
cache.idemLogger ??= pino({
  name: 'idem-web',
  level: process.env.LOG_LEVEL ?? (process.env.NODE_ENV === 'test' ? 'silent' : 'info'),
});
export const logger = cache.idemLogger;

/**
 * The correlation id of a failed request: the same error object always gets the same id, so the 5xx body
 * (errorFormatter) and the log line with the real cause (the route's onError) name each other.
 */
const errorIds = new WeakMap<object, string>();
export function errorIdOf(error: object): string {
  let id = errorIds.get(error);
  if (!id) {
    id = crypto.randomUUID();
    errorIds.set(error, id);
  }
  return id;
}

export function logIdempotencyEvent(event: IdempotencyEvent) {
  logger.info(
    {
      procedure: event.procedure,
      mode: event.mode,
      outcome: event.outcome,
      latency_ms: Math.round(event.durationMs * 100) / 100,
      key_hash: event.keyHash,
    },
    'idempotent request',
  );
}
