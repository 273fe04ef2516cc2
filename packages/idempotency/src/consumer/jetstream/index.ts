/**
 * @idem/idempotency/consumer/jetstream — a NATS JetStream durable pull consumer onto the idempotent consumer
 * (explicit acks, AckWait redelivery, `info.deliveryCount`), and the outbox relay's publisher with `Nats-Msg-Id`.
 * Structural: pass `@nats-io/jetstream`'s objects; nothing is imported from it.
 */

export {
  consumeJetStream,
  type JetStreamConsumeOptions,
  type JetStreamDelivery,
  type JetStreamPublishClient,
  type JetStreamPublisherOptions,
  jetStreamMessage,
  jetStreamPublisher,
  MESSAGE_TYPE_HEADER,
  NATS_MSG_ID_HEADER,
} from './adapter.ts';
