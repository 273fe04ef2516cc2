/**
 * The idempotent consumer: an inbox on the key table. A message's id is claimed under the store's unique index
 * (scope = the consumer's name, procedure = the message type, key = the message id, fingerprint = SHA-256 of the
 * body) in the SAME transaction as the handler's effect — transactional mode's lifecycle (core/transactional.ts),
 * not a claim of its own — so the effect and the inbox row commit together or not at all. A redelivery of a
 * committed message finds its row and runs nothing. The row is written completed by the claim itself (there is
 * no response to store after the handler), so the inbox adds one statement to the effect's transaction, not two.
 */
import { hash } from 'node:crypto';
import { resolveOptions } from '../core/config.ts';
import { IdempotencyError, IdempotencyErrorCode } from '../core/errors.ts';
import type { StoredResponse } from '../core/record.ts';
import type { HandledRequest, IdempotentRequest } from '../core/request.ts';
import type { IdempotencyStore } from '../core/store.ts';
import { handleTransactional } from '../core/transactional.ts';
import { MariadbKeyColumnTooLongError } from '../mariadb/errors.ts';
import { MAX_KEY_LENGTH } from '../protocol.ts';
import type { ConsumerDecision, DeadLetterReason, MessageConsumer, QueueMessage } from './message.ts';

/** A delivery as the handler sees it: the body decoded. */
export interface ConsumedMessage<TBody> extends Omit<QueueMessage, 'body'> {
  body: TBody;
}

/** One delivery's outcome, for metrics and logs (`onEvent`). */
export interface ConsumerEvent {
  consumer: string;
  type: string;
  id: string;
  deliveryCount: number;
  outcome: 'executed' | 'duplicate' | 'anomaly' | 'retry' | 'dead-letter';
  /** `dead-letter` only. */
  reason?: DeadLetterReason;
  durationMs: number;
}

/** A redelivered id whose body differs from the one the inbox holds: acknowledged, never executed. */
export interface ConsumerAnomaly {
  consumer: string;
  type: string;
  id: string;
  deliveryCount: number;
  /** SHA-256 (hex) of this delivery's body. */
  fingerprint: string;
  /** SHA-256 (hex) of the body the inbox holds, when it could be read. */
  storedFingerprint: string | null;
}

export interface IdempotentConsumerConfig<TTx, TBody> {
  /** Any store of the library: the inbox is its key table. */
  store: IdempotencyStore<TTx>;
  /** The consumer's (or queue's) name: the inbox's scope. Two consumers of one message each run it once. */
  name: string;
  /** The effect: write through `tx`, which commits with the message's inbox row. Throw to retry. */
  handler: (message: ConsumedMessage<TBody>, tx: TTx) => Promise<void>;
  /** The body's bytes → what the handler gets. Default: JSON of the UTF-8 text. A throw dead-letters the message. */
  decode?: (body: Uint8Array) => TBody;
  /** Deliveries before a message the handler keeps failing on is dead-lettered. Default 5. */
  maxDeliveries?: number;
  /** A retry's delay: `initialMs` × 2^(deliveryCount − 1), at most `maxMs`. Default 1 000 ms and 60 000 ms. */
  backoff?: { initialMs?: number; maxMs?: number };
  /** True for a handler error that no retry can fix: dead-lettered at once. Default: none. */
  isPermanent?: (error: unknown) => boolean;
  /**
   * How long a message id is remembered. It must outlast every redelivery and republish of the message (the
   * broker's retention, the outbox relay's downtime). Default 604 800 s (7 days).
   */
  retentionSeconds?: number;
  /** How long a delivery waits for a concurrent delivery of the same id to commit before it retries. Default 5 000 ms. */
  lockTimeoutMs?: number;
  /** The handler's transaction timeout. Default 15 000 ms. */
  transactionTimeoutMs?: number;
  /** One call per delivery. */
  onEvent?: (event: ConsumerEvent) => void;
  /** A redelivered id with another body. Default: `console.warn` (ids and hashes only, never a body). */
  onAnomaly?: (anomaly: ConsumerAnomaly) => void;
}

export interface IdempotentConsumer extends MessageConsumer {
  readonly name: string;
}

const DEFAULT_RETENTION_SECONDS = 7 * 86_400;

/** The stored response of a handled message: the inbox row says "done"; there is nothing to replay. */
const HANDLED: StoredResponse = { kind: 'output', httpStatus: 200, body: '' };

const utf8 = new TextDecoder('utf-8', { fatal: true });
function decodeJson(body: Uint8Array): unknown {
  return JSON.parse(utf8.decode(body));
}

/** SHA-256 (hex) of a body's bytes: the inbox fingerprint. */
export function fingerprintBody(body: Uint8Array): string {
  return hash('sha256', body, 'hex');
}

export function createIdempotentConsumer<TTx, TBody = unknown>(
  config: IdempotentConsumerConfig<TTx, TBody>,
): IdempotentConsumer {
  const { store, name, handler } = config;
  if (!name) throw new RangeError('createIdempotentConsumer: name must not be empty');
  const maxDeliveries = config.maxDeliveries ?? 5;
  if (!Number.isInteger(maxDeliveries) || maxDeliveries < 1)
    throw new RangeError(`maxDeliveries must be a whole number ≥ 1, got ${maxDeliveries}`);
  const initialMs = config.backoff?.initialMs ?? 1_000;
  const maxMs = config.backoff?.maxMs ?? 60_000;
  if (!(initialMs >= 0 && maxMs >= initialMs && Number.isFinite(maxMs)))
    throw new RangeError(`backoff must have 0 ≤ initialMs ≤ maxMs < Infinity, got ${initialMs} and ${maxMs}`);
  const decode = config.decode ?? (decodeJson as (body: Uint8Array) => TBody);
  const isPermanent = config.isPermanent ?? (() => false);
  const onAnomaly = config.onAnomaly ?? warnAnomaly;
  // Transactional mode's options; an inbox key is never `processing` to anyone else, so no in-flight cap.
  const options = resolveOptions({
    retentionSeconds: config.retentionSeconds ?? DEFAULT_RETENTION_SECONDS,
    lockTimeoutMs: config.lockTimeoutMs,
    transactionTimeoutMs: config.transactionTimeoutMs,
    maxInFlightPerScope: Number.POSITIVE_INFINITY,
  });

  const backoffMs = (deliveryCount: number) =>
    Math.min(maxMs, initialMs * 2 ** Math.max(0, Math.min(deliveryCount - 1, 30)));

  async function decide(message: QueueMessage): Promise<ConsumerDecision> {
    // The type is the inbox key's procedure: bounded like the id, or a long one could never be stored (Postgres'
    // primary key entry is at most 2 704 bytes) and would be retried forever.
    if (
      !message.id ||
      message.id.length > MAX_KEY_LENGTH ||
      !message.type ||
      message.type.length > MAX_KEY_LENGTH
    )
      return deadLetter(
        'invalid',
        new RangeError('a message needs an id and a type of 1–255 characters each'),
      );
    let body: TBody;
    try {
      body = decode(message.body);
    } catch (error) {
      return deadLetter('invalid', error);
    }
    const request: IdempotentRequest = {
      scope: name,
      procedure: message.type,
      key: message.id,
      fingerprint: fingerprintBody(message.body),
    };
    const consumed: ConsumedMessage<TBody> = { ...message, body };
    // The handler's own failure, told apart from the store's: only the handler's count towards dead-lettering.
    let failure: { error: unknown } | null = null;
    let handled: HandledRequest<void>;
    try {
      handled = await handleTransactional(
        store,
        options,
        request,
        async (tx) => {
          try {
            await handler(consumed, tx);
          } catch (error) {
            failure = { error };
            // Not stored: the transaction rolls back, the inbox row with it.
            return { result: undefined, response: null };
          }
          return { result: undefined, response: HANDLED };
        },
        { responseBeforeRun: HANDLED },
      );
    } catch (error) {
      if (error instanceof IdempotencyError && error.code === IdempotencyErrorCode.keyReused) {
        onAnomaly({
          consumer: name,
          type: message.type,
          id: message.id,
          deliveryCount: message.deliveryCount,
          fingerprint: request.fingerprint,
          storedFingerprint: await storedFingerprintOf(request),
        });
        return { action: 'ack', outcome: 'anomaly' };
      }
      // An id or type longer than the store's key columns hold (MariaDB: 255 bytes of UTF-8): refused before any
      // SQL, on every delivery — the message's fault, not the store's. Retried, it would never end.
      if (error instanceof MariadbKeyColumnTooLongError && error.column !== 'scope')
        return deadLetter('invalid', error);
      // The store's failure (unreachable, a concurrent delivery of the id still running past lockTimeoutMs, a
      // failed commit): nothing committed and the message is not at fault, so it is retried however often.
      return { action: 'retry', delayMs: backoffMs(message.deliveryCount), error };
    }
    if (handled.kind === 'executed') return { action: 'ack', outcome: 'executed' };
    if (handled.kind === 'replayed') return { action: 'ack', outcome: 'duplicate' };
    const error = (failure as { error: unknown } | null)?.error;
    if (isPermanent(error)) return deadLetter('permanent', error);
    if (message.deliveryCount >= maxDeliveries) return deadLetter('max-deliveries', error);
    return { action: 'retry', delayMs: backoffMs(message.deliveryCount), error };
  }

  async function storedFingerprintOf(key: IdempotentRequest): Promise<string | null> {
    try {
      return (await store.find(key))?.fingerprint ?? null;
    } catch {
      return null;
    }
  }

  return {
    name,
    async handle(message) {
      const started = performance.now();
      const decision = await decide(message).catch(
        (error: unknown): ConsumerDecision => ({
          action: 'retry',
          delayMs: backoffMs(message.deliveryCount),
          error,
        }),
      );
      config.onEvent?.({
        consumer: name,
        type: message.type,
        id: message.id,
        deliveryCount: message.deliveryCount,
        outcome: decision.action === 'ack' ? decision.outcome : decision.action,
        ...(decision.action === 'dead-letter' ? { reason: decision.reason } : {}),
        durationMs: performance.now() - started,
      });
      return decision;
    },
  };
}

function deadLetter(reason: DeadLetterReason, error: unknown): ConsumerDecision {
  return { action: 'dead-letter', reason, error };
}

function warnAnomaly(anomaly: ConsumerAnomaly): void {
  console.warn(
    `idempotent consumer ${anomaly.consumer}: message ${anomaly.id} (${anomaly.type}, delivery ${anomaly.deliveryCount}) ` +
      `came back with another body (sha256 ${anomaly.fingerprint}, the inbox holds ${anomaly.storedFingerprint ?? 'unknown'}); ` +
      'acknowledged without running the handler',
  );
}
