/** QUEUE_URL's broker, the namespace's names, and the publisher that puts an outbox destination in them. */
import type { OutboxRecord } from '@idem/idempotency/consumer';
import { describe, expect, it } from 'vitest';
import {
  brokerKindOf,
  brokerNames,
  namespacedPublisher,
  QueueUrlError,
  redactedQueueUrl,
} from '../src/index.ts';

describe('brokerKindOf', () => {
  it('amqp:// and amqps:// are RabbitMQ; nats:// and tls:// are NATS', () => {
    expect(brokerKindOf('amqp://guest:guest@127.0.0.1:5672')).toBe('rabbitmq');
    expect(brokerKindOf('amqps://mq.example.com/vhost')).toBe('rabbitmq');
    expect(brokerKindOf('nats://127.0.0.1:4222')).toBe('nats');
    expect(brokerKindOf('tls://nats.example.com:4222')).toBe('nats');
  });

  it('anything else is a QueueUrlError that names the schemes it takes', () => {
    expect(() => brokerKindOf('redis://127.0.0.1:6379')).toThrow(QueueUrlError);
    expect(() => brokerKindOf('kafka://k:9092')).toThrow(/kafka: is not a broker Idem knows; use amqp:\/\//);
    expect(() => brokerKindOf('127.0.0.1:5672')).toThrow(QueueUrlError);
  });
});

it('redactedQueueUrl hides the password, keeps the rest', () => {
  expect(redactedQueueUrl('amqp://shop:s3cret@mq:5672/prod')).toBe('amqp://shop:***@mq:5672/prod');
  expect(redactedQueueUrl('nats://127.0.0.1:4222')).toBe('nats://127.0.0.1:4222');
});

describe('brokerNames', () => {
  it('puts every queue, subject and the stream under the namespace', () => {
    const names = brokerNames('shop-eu');
    expect(names.destination('fulfilment')).toBe('shop-eu.fulfilment');
    expect(names.deadLetter('fulfilment')).toBe('shop-eu.fulfilment.dead');
    expect(names.stream).toBe('SHOP_EU');
    expect(brokerNames().namespace).toBe('idem');
  });

  it('refuses a namespace that would break a subject or a stream name', () => {
    for (const bad of ['', 'Shop', 'shop.eu', 'shop eu', '9shop', 'x'.repeat(33), 'shop>'])
      expect(() => brokerNames(bad), bad).toThrow(RangeError);
  });
});

it('namespacedPublisher publishes each record to its destination in the namespace, the rest unchanged', async () => {
  const published: OutboxRecord[][] = [];
  const publisher = namespacedPublisher(
    {
      async publish(messages) {
        published.push([...messages]);
      },
    },
    brokerNames('t1'),
  );
  const record: OutboxRecord = {
    id: 'm-1',
    type: 'fulfilment',
    destination: 'fulfilment',
    body: '{}',
    headers: {},
  };
  await publisher.publish([record]);
  expect(published).toEqual([[{ ...record, destination: 't1.fulfilment' }]]);
});
