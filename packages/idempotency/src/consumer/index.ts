/**
 * @idem/idempotency/consumer — at-least-once queues, handled once: the idempotent consumer (an inbox on the key
 * table, claimed in the handler's own transaction) and the transactional outbox with its relay. Broker adapters:
 * `./consumer/rabbitmq`, `./consumer/jetstream`.
 */

export {
  type ConsumedMessage,
  type ConsumerAnomaly,
  type ConsumerEvent,
  createIdempotentConsumer,
  fingerprintBody,
  type IdempotentConsumer,
  type IdempotentConsumerConfig,
} from './consumer.ts';
export type { ConsumerDecision, DeadLetterReason, MessageConsumer, QueueMessage } from './message.ts';
export {
  createOutbox,
  type Outbox,
  type OutboxMessage,
  type OutboxOptions,
  type OutboxPublisher,
  type OutboxRecord,
  type OutboxRelay,
  type RelayOptions,
  type StartRelayOptions,
} from './outbox.ts';
export { DEFAULT_OUTBOX_TABLE, type OutboxSchema, outboxSchema } from './outbox-schema.ts';
