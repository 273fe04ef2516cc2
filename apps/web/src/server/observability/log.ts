/**
 * Structured logs (pino, JSON lines on stdout). One line per idempotent request: procedure, mode, outcome,
 * latency and a hash of the key — never the raw key, never the stored body.
 */
import type { IdempotencyEvent } from '@idem/idempotency/trpc';
import pino from 'pino';

const cache = globalThis as unknown as { idemLogger?: pino.Logger };
cache.idemLogger ??= pino({
  name: 'idem-web',
  level: process.env.LOG_LEVEL ?? (process.env.NODE_ENV === 'test' ? 'silent' : 'info'),
});
export const logger = cache.idemLogger;

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
