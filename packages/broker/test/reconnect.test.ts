/**
 * The worker's broker connection across a network cut (a TCP proxy on loopback that the test cuts): the
 * connection comes back by itself and the fulfilment subscription resumes — a message published after the cut
 * is consumed. CONTROL: the same consumer on a client that does not reconnect (amqplib as it is; a NATS client
 * with `reconnect: false`) is gone after the cut, and the message waits in the queue with nobody to take it.
 */
import { randomBytes } from 'node:crypto';
import type { ConsumerDecision, MessageConsumer, QueueMessage } from '@idem/idempotency/consumer';
import { consumeJetStream } from '@idem/idempotency/consumer/jetstream';
import { consumeRabbitMq } from '@idem/idempotency/consumer/rabbitmq';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNatsClient } from '@nats-io/transport-node';
import amqp from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
// The library's test proxy: a cut destroys both sides of every connection through it.
import { type TcpProxy, tcpProxy } from '../../idempotency/test/support/tcp-proxy.ts';
import { type Broker, type BrokerLog, brokerNames, connectBroker, FulfilmentMessage } from '../src/index.ts';

const RABBITMQ = { host: '127.0.0.1', port: 5672 };
const NATS = { host: '127.0.0.1', port: 4222 };

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

function collectingLog(): BrokerLog & { lines: string[] } {
  const lines: string[] = [];
  return { lines, info: (line) => lines.push(line), warn: (line) => lines.push(`WARN ${line}`) };
}

/** Acknowledges every message and remembers its id. */
function recordingConsumer(): MessageConsumer & { ids: string[] } {
  const ids: string[] = [];
  return {
    ids,
    async handle(message: QueueMessage): Promise<ConsumerDecision> {
      ids.push(message.id);
      return { action: 'ack', outcome: 'executed' };
    },
  };
}

const distinct = (ids: string[]) => [...new Set(ids)].sort();

const record = (id: string) => ({
  id,
  type: FulfilmentMessage.type,
  destination: FulfilmentMessage.destination,
  body: JSON.stringify({ orderId: id }),
  headers: {},
});

async function proxyTo(target: { host: string; port: number }): Promise<TcpProxy> {
  const proxy = await tcpProxy(target.port);
  cleanups.push(() => proxy.close());
  return proxy;
}

/** A network cut that heals at once: every connection through `proxy` dropped, new ones let through. */
function blip(proxy: TcpProxy): void {
  proxy.cut();
  proxy.restore();
}

async function brokerThrough(url: string, namespace: string, log: BrokerLog): Promise<Broker> {
  const broker = await connectBroker(url, brokerNames(namespace), log);
  cleanups.push(() => broker.close());
  return broker;
}

/** Publishes through `broker` once it takes messages again (it refuses them while it is reconnecting). */
async function publishWhenBack(broker: Broker, id: string): Promise<void> {
  await expect
    .poll(() =>
      broker.publisher.publish([record(id)]).then(
        () => true,
        () => false,
      ),
    )
    .toBe(true);
}

describe('RabbitMQ: the worker reconnects after a network cut', () => {
  it('the subscription resumes: a message published after the cut is consumed (CONTROL, amqplib alone: the consumer is gone, the message waits)', async () => {
    const namespace = `t-${randomBytes(4).toString('hex')}`;
    const queue = brokerNames(namespace).destination(FulfilmentMessage.destination);
    const proxy = await proxyTo(RABBITMQ);
    const log = collectingLog();
    const broker = await brokerThrough(`amqp://guest:guest@127.0.0.1:${proxy.port}`, namespace, log);
    const consumer = recordingConsumer();
    await broker.subscribeFulfilment(consumer, { concurrency: 2 });

    await broker.publisher.publish([record('before-cut')]);
    await expect.poll(() => consumer.ids).toEqual(['before-cut']);
    blip(proxy);
    await expect.poll(() => log.lines.some((line) => line.startsWith('RabbitMQ reconnected'))).toBe(true);
    await publishWhenBack(broker, 'after-cut');
    // An ack on its way at the cut is lost with the connection: 'before-cut' may come again (the worker's inbox
    // acknowledges that copy without running it).
    await expect.poll(() => distinct(consumer.ids)).toEqual(['after-cut', 'before-cut']);
    expect(proxy.connections).toBe(2);

    // CONTROL: the queue's consumer on a plain amqplib connection through a proxy of its own.
    const admin = await amqp.connect(`amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}`);
    cleanups.push(() => admin.close());
    const adminChannel = await admin.createConfirmChannel();
    await broker.close(); // the protected consumer leaves the queue to the control
    const controlProxy = await proxyTo(RABBITMQ);
    const plain = await amqp.connect(`amqp://guest:guest@127.0.0.1:${controlProxy.port}`);
    plain.on('error', () => {});
    const control = recordingConsumer();
    await consumeRabbitMq({ channel: await plain.createChannel(), queue, consumer: control, prefetch: 2 });
    await expect.poll(async () => (await adminChannel.checkQueue(queue)).consumerCount).toBe(1);
    blip(controlProxy);
    await expect.poll(async () => (await adminChannel.checkQueue(queue)).consumerCount).toBe(0);
    adminChannel.sendToQueue(queue, Buffer.from('{}'), {
      messageId: 'control-after-cut',
      type: 'fulfilment',
    });
    await adminChannel.waitForConfirms();
    await expect.poll(async () => (await adminChannel.checkQueue(queue)).messageCount).toBe(1);
    expect(control.ids).toEqual([]);
    expect(controlProxy.connections).toBe(1);
    await adminChannel.deleteQueue(queue);
    await adminChannel.deleteQueue(brokerNames(namespace).deadLetter(FulfilmentMessage.destination));
  });
});

describe('NATS JetStream: the worker reconnects after a network cut', () => {
  it('the subscription resumes: a message published after the cut is consumed (CONTROL, a client with reconnect off: the message stays pending)', async () => {
    const namespace = `t-${randomBytes(4).toString('hex')}`;
    const names = brokerNames(namespace);
    const proxy = await proxyTo(NATS);
    const log = collectingLog();
    const broker = await brokerThrough(`nats://127.0.0.1:${proxy.port}`, namespace, log);
    const consumer = recordingConsumer();
    await broker.subscribeFulfilment(consumer, { concurrency: 2 });
    const admin = await connectNatsClient({ servers: `${NATS.host}:${NATS.port}` });
    cleanups.push(() => admin.close());
    const jsm = await jetstreamManager(admin);
    cleanups.push(() => jsm.streams.delete(names.stream));

    await broker.publisher.publish([record('before-cut')]);
    await expect.poll(() => consumer.ids).toEqual(['before-cut']);
    blip(proxy);
    await expect.poll(() => log.lines.includes('NATS reconnected')).toBe(true);
    await publishWhenBack(broker, 'after-cut');
    await expect.poll(() => distinct(consumer.ids)).toEqual(['after-cut', 'before-cut']);
    expect(proxy.connections).toBeGreaterThanOrEqual(2);
    await broker.close();

    // CONTROL: the durable's messages on a client that does not reconnect.
    const controlProxy = await proxyTo(NATS);
    const plain = await connectNatsClient({ servers: `127.0.0.1:${controlProxy.port}`, reconnect: false });
    const messages = await (
      await jetstream(plain).consumers.get(names.stream, FulfilmentMessage.type)
    ).consume();
    const control = recordingConsumer();
    const loop = consumeJetStream({ messages, consumer: control }).catch(() => {});
    blip(controlProxy);
    await plain.closed();
    await loop;
    await jetstream(admin).publish(names.destination(FulfilmentMessage.destination), Buffer.from('{}'), {
      msgID: 'control-after-cut',
    });
    await expect
      .poll(async () => (await jsm.consumers.info(names.stream, FulfilmentMessage.type)).num_pending)
      .toBe(1);
    expect(control.ids).toEqual([]);
  });
});
