/**
 * A broker as the checkout's worker uses it: a publisher for the outbox relay, and a subscription that hands
 * every fulfilment message to a consumer. Both survive the broker going away and coming back: the publisher
 * fails while it is away (the relay leaves its rows unsent and tries again), the subscription resumes.
 */
import type { MessageConsumer, OutboxPublisher } from '@idem/idempotency/consumer';
import type { BrokerKind } from './queue-url.ts';

export interface BrokerLog {
  info(message: string): void;
  warn(message: string, error?: unknown): void;
}

export interface SubscribeOptions {
  /** Messages handled at once. */
  concurrency: number;
}

export interface Broker {
  readonly kind: BrokerKind;
  /** For the outbox relay: resolves once the broker confirmed every message, rejects while it is away. */
  readonly publisher: OutboxPublisher;
  /** Hands every fulfilment message to `consumer` until `close()`, across reconnections. One subscription per broker. */
  subscribeFulfilment(consumer: MessageConsumer, options: SubscribeOptions): Promise<void>;
  /** Stops the subscription, waits for the messages being handled, closes the connection. */
  close(): Promise<void>;
}

/** Waits before reconnecting: 250 ms, doubling to 5 s. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(5_000, 250 * 2 ** Math.min(attempt, 5));
}
