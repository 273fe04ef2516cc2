/**
 * RabbitMQ (AMQP 0-9-1) onto the consumer core, and a publisher with publisher confirms for the outbox relay.
 * Structural: written against amqplib's channel (any object with the same methods fits), so nothing here
 * imports a client at runtime.
 *
 * The queue is a quorum queue: it counts deliveries in the `x-delivery-count` header (absent on the first), which
 * is what dead-lettering after N deliveries reads. A dead-lettered message is nacked without requeue: give the
 * queue an `x-dead-letter-exchange`, or RabbitMQ drops it.
 */
import type { ConsumerDecision, MessageConsumer, QueueMessage } from '../message.ts';
import type { OutboxPublisher, OutboxRecord } from '../outbox.ts';

/** The part of an amqplib `ConsumeMessage` the adapter reads. */
export interface RabbitMqDelivery {
  content: Uint8Array;
  fields: { redelivered: boolean; routingKey: string };
  properties: {
    messageId?: unknown;
    type?: unknown;
    headers?: Record<string, unknown> | undefined;
  };
}

/** The part of an amqplib `Channel` the consumer uses. */
export interface RabbitMqConsumerChannel<TDelivery extends RabbitMqDelivery> {
  prefetch(count: number): Promise<unknown>;
  consume(
    queue: string,
    onMessage: (delivery: TDelivery | null) => void,
    options?: { noAck?: boolean },
  ): Promise<{ consumerTag: string }>;
  cancel(consumerTag: string): Promise<unknown>;
  ack(delivery: TDelivery): void;
  nack(delivery: TDelivery, allUpTo?: boolean, requeue?: boolean): void;
}

export interface RabbitMqConsumeOptions<TDelivery extends RabbitMqDelivery> {
  channel: RabbitMqConsumerChannel<TDelivery>;
  queue: string;
  /** `createIdempotentConsumer(…)`, or any `MessageConsumer`. */
  consumer: MessageConsumer;
  /** Unacknowledged deliveries this channel holds at once (basic.qos), each handled concurrently. Default 10. */
  prefetch?: number;
  /** An ack or nack that failed (the channel closed under it): the broker redelivers the message. */
  onError?: (error: unknown) => void;
}

export interface RabbitMqConsumption {
  consumerTag: string;
  /** Cancels the consumer, requeues deliveries waiting out a retry delay, and waits for those being handled. */
  stop(): Promise<void>;
}

/** A delivery as the consumer core sees it. */
export function rabbitMqMessage(delivery: RabbitMqDelivery): QueueMessage {
  const { properties, fields } = delivery;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(properties.headers ?? {}))
    if (typeof value === 'string') headers[name] = value;
  // Quorum queues count redeliveries in x-delivery-count; a queue that does not (classic) at least flags one.
  const counted = Number(properties.headers?.['x-delivery-count'] ?? 0);
  const redeliveries = Number.isFinite(counted) && counted > 0 ? counted : fields.redelivered ? 1 : 0;
  return {
    id: typeof properties.messageId === 'string' ? properties.messageId : '',
    type: typeof properties.type === 'string' ? properties.type : fields.routingKey,
    body: delivery.content,
    deliveryCount: redeliveries + 1,
    headers,
  };
}

/** Consumes `queue` with manual acks: ack after commit, nack + requeue after the retry delay, nack to dead-letter. */
export async function consumeRabbitMq<TDelivery extends RabbitMqDelivery>(
  options: RabbitMqConsumeOptions<TDelivery>,
): Promise<RabbitMqConsumption> {
  const { channel, consumer } = options;
  const onError = options.onError ?? (() => {});
  const handling = new Set<Promise<void>>();
  const delayed = new Map<TDelivery, ReturnType<typeof setTimeout>>();
  let stopped = false;

  const settle = (delivery: TDelivery, decision: ConsumerDecision) => {
    try {
      if (decision.action === 'ack') channel.ack(delivery);
      else if (decision.action === 'dead-letter') channel.nack(delivery, false, false);
      else if (stopped || decision.delayMs <= 0) channel.nack(delivery, false, true);
      else
        delayed.set(
          delivery,
          setTimeout(() => {
            delayed.delete(delivery);
            settle(delivery, { ...decision, delayMs: 0 });
          }, decision.delayMs),
        );
    } catch (error) {
      onError(error);
    }
  };

  await channel.prefetch(options.prefetch ?? 10);
  const { consumerTag } = await channel.consume(
    options.queue,
    (delivery) => {
      // null: the broker cancelled the consumer (the queue was deleted).
      if (!delivery) return;
      const handled = consumer.handle(rabbitMqMessage(delivery)).then(
        (decision) => settle(delivery, decision),
        // A consumer that broke its promise never to reject: redelivered after a second.
        (error: unknown) => settle(delivery, { action: 'retry', delayMs: 1_000, error }),
      );
      handling.add(handled);
      void handled.finally(() => handling.delete(handled));
    },
    { noAck: false },
  );

  return {
    consumerTag,
    async stop() {
      stopped = true;
      await channel.cancel(consumerTag).catch(onError);
      for (const [delivery, timer] of delayed) {
        clearTimeout(timer);
        delayed.delete(delivery);
        settle(delivery, { action: 'retry', delayMs: 0, error: null });
      }
      await Promise.all(handling);
    },
  };
}

/** The part of an amqplib `ConfirmChannel` the publisher uses. */
export interface RabbitMqConfirmChannel {
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: {
      messageId: string;
      type: string;
      persistent: boolean;
      contentType: string;
      headers: Record<string, string>;
    },
  ): boolean;
  waitForConfirms(): Promise<void>;
  once(event: 'drain', listener: () => void): unknown;
}

export interface RabbitMqPublisherOptions {
  /** A channel made by `createConfirmChannel()`. */
  channel: RabbitMqConfirmChannel;
  /** The exchange; default `''`, the default exchange, which routes a message to the queue its routing key names. */
  exchange?: string;
}

/**
 * The outbox relay's publisher: each message persistent, with `messageId` = the outbox id and `type`, routed by
 * its destination; resolves once the broker confirmed them all (`waitForConfirms` rejects on a nack).
 */
export function rabbitMqPublisher(options: RabbitMqPublisherOptions): OutboxPublisher {
  const { channel } = options;
  const exchange = options.exchange ?? '';
  return {
    async publish(messages: readonly OutboxRecord[]) {
      for (const message of messages) {
        const ready = channel.publish(exchange, message.destination, Buffer.from(message.body, 'utf8'), {
          messageId: message.id,
          type: message.type,
          persistent: true,
          contentType: 'application/json',
          headers: { ...message.headers },
        });
        // The channel's buffer is full: wait until it has written what it holds.
        if (!ready) await new Promise<void>((resolve) => channel.once('drain', resolve));
      }
      await channel.waitForConfirms();
    },
  };
}
