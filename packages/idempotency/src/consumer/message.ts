/**
 * What a broker adapter hands the consumer core, and what it gets back. The core knows no broker: an adapter
 * translates a delivery into a `QueueMessage` and the `ConsumerDecision` into the broker's ack, requeue or
 * dead-letter.
 */

/** One delivery of a message, as the broker gave it. */
export interface QueueMessage {
  /** The message id, set by the publisher and kept on every redelivery: the inbox key. 1–255 characters. */
  id: string;
  /** The message type: the inbox's procedure (RabbitMQ: the `type` property; JetStream: a header or the subject). */
  type: string;
  /** The body's bytes, as delivered: their SHA-256 is the fingerprint a redelivery is compared by. */
  body: Uint8Array;
  /** 1 on the first delivery; the broker's count on a redelivery. */
  deliveryCount: number;
  /** The message's string-valued headers. */
  headers: Readonly<Record<string, string>>;
}

/** Why a message is dead-lettered: it will never be handled as it is. */
export type DeadLetterReason =
  /** The handler failed on `maxDeliveries` deliveries. */
  | 'max-deliveries'
  /** The handler threw an error that `isPermanent` calls permanent. */
  | 'permanent'
  /** No id, an id longer than 255 characters, no type, or a body that `decode` refused. */
  | 'invalid';

/** What the adapter does with the delivery. */
export type ConsumerDecision =
  /**
   * Acknowledge: `executed` (the effect and the inbox row committed together), `duplicate` (the id is already in
   * the inbox with the same body: nothing ran) or `anomaly` (the id is in the inbox with another body: nothing
   * ran, and `onAnomaly` was told).
   */
  | { action: 'ack'; outcome: 'executed' | 'duplicate' | 'anomaly' }
  /** Nothing committed: requeue after `delayMs` (RabbitMQ: nack + requeue; JetStream: nak with the delay). */
  | { action: 'retry'; delayMs: number; error: unknown }
  /** Nothing committed, and never will: to the dead-letter destination (RabbitMQ: nack without requeue; JetStream: term). */
  | { action: 'dead-letter'; reason: DeadLetterReason; error: unknown };

/** Anything that decides a delivery: the idempotent consumer, or a plain one a test builds as a control. */
export interface MessageConsumer {
  /** Never rejects: every failure is a decision. */
  handle(message: QueueMessage): Promise<ConsumerDecision>;
}
