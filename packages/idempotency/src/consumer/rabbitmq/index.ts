/**
 * @idem/idempotency/consumer/rabbitmq — a RabbitMQ quorum queue onto the idempotent consumer (manual acks,
 * prefetch, `x-delivery-count`), and the outbox relay's publisher with publisher confirms. Structural: pass
 * amqplib's channels; nothing is imported from amqplib.
 */

export {
  consumeRabbitMq,
  type RabbitMqConfirmChannel,
  type RabbitMqConsumeOptions,
  type RabbitMqConsumerChannel,
  type RabbitMqConsumption,
  type RabbitMqDelivery,
  type RabbitMqPublisherOptions,
  rabbitMqMessage,
  rabbitMqPublisher,
} from './adapter.ts';
