/**
 * RabbitMQ for the checkout: the fulfilment queue is a durable quorum queue (it counts deliveries, which
 * dead-lettering after N reads) whose dead letters go to a second quorum queue. amqplib does not reconnect by
 * itself: a connection that closes under the worker is opened again with backoff, the topology re-asserted and
 * the subscription resumed; deliveries that were not acknowledged come back from the broker.
 */

import type { MessageConsumer, OutboxPublisher } from '@idem/idempotency/consumer';
import {
  consumeRabbitMq,
  type RabbitMqConsumption,
  rabbitMqPublisher,
} from '@idem/idempotency/consumer/rabbitmq';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { type Broker, type BrokerLog, reconnectDelayMs, type SubscribeOptions } from './broker.ts';
import { FulfilmentMessage } from './fulfilment-messages.ts';
import type { BrokerNames } from './names.ts';

async function assertTopology(channel: Channel, names: BrokerNames): Promise<void> {
  const quorum = { 'x-queue-type': 'quorum' };
  const dead = names.deadLetter(FulfilmentMessage.destination);
  await channel.assertQueue(dead, { durable: true, arguments: quorum });
  await channel.assertQueue(names.destination(FulfilmentMessage.destination), {
    durable: true,
    arguments: { ...quorum, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': dead },
  });
}

interface Session {
  connection: ChannelModel;
  publisher: OutboxPublisher;
  consuming: Channel;
  consumption?: RabbitMqConsumption;
}

export async function connectRabbitMq(url: string, names: BrokerNames, log: BrokerLog): Promise<Broker> {
  let session: Session | undefined;
  let subscription: { consumer: MessageConsumer; options: SubscribeOptions } | undefined;
  let closing = false;

  async function subscribe(current: Session): Promise<void> {
    if (!subscription) return;
    current.consumption = await consumeRabbitMq({
      channel: current.consuming,
      queue: names.destination(FulfilmentMessage.destination),
      consumer: subscription.consumer,
      prefetch: subscription.options.concurrency,
      onError: (error) =>
        log.warn('RabbitMQ: an ack or nack failed; the broker redelivers the message', error),
    });
  }

  async function open(): Promise<Session> {
    const connection = await amqp.connect(url);
    try {
      const setup = await connection.createChannel();
      await assertTopology(setup, names);
      await setup.close();
      const confirming = await connection.createConfirmChannel();
      const consuming = await connection.createChannel();
      const opened: Session = {
        connection,
        publisher: rabbitMqPublisher({ channel: confirming }),
        consuming,
      };
      // A channel closed by the broker (a protocol error) leaves the connection up: close it, so it reopens whole.
      for (const channel of [confirming, consuming])
        channel.on('close', () => void connection.close().catch(() => {}));
      connection.on('error', (error: unknown) => log.warn('RabbitMQ connection error', error));
      connection.on('close', () => {
        if (session === opened) session = undefined;
        if (!closing) reconnect(0);
      });
      await subscribe(opened);
      return opened;
    } catch (error) {
      await connection.close().catch(() => {});
      throw error;
    }
  }

  function reconnect(attempt: number): void {
    const delay = reconnectDelayMs(attempt);
    if (attempt === 0) log.warn(`RabbitMQ connection lost; reconnecting`);
    setTimeout(() => {
      if (closing) return;
      open().then(
        (opened) => {
          if (closing) return void opened.connection.close().catch(() => {});
          session = opened;
          log.info(`RabbitMQ reconnected after ${attempt + 1} attempt(s)`);
        },
        () => reconnect(attempt + 1),
      );
    }, delay).unref();
  }

  session = await open();
  return {
    kind: 'rabbitmq',
    publisher: {
      publish(messages) {
        if (!session) return Promise.reject(new Error('RabbitMQ is not connected; the relay tries again'));
        return session.publisher.publish(messages);
      },
    },
    async subscribeFulfilment(consumer, options) {
      if (subscription) throw new Error('subscribeFulfilment: this broker already has a subscription');
      subscription = { consumer, options };
      if (session) await subscribe(session);
    },
    async close() {
      closing = true;
      const current = session;
      session = undefined;
      if (!current) return;
      await current.consumption?.stop().catch(() => {});
      await current.connection.close().catch(() => {});
    },
  };
}
