/**
 * @idem/broker — the checkout's fulfilment on a message broker instead of pg-boss (QUEUE_URL=amqp://… or
 * nats://…): the outbox the paying transaction writes to, and the connection the worker relays and consumes on.
 */
import type { Broker, BrokerLog } from './broker.ts';
import { type BrokerNames, namespacedPublisher } from './names.ts';
import { connectNats } from './nats.ts';
import { brokerKindOf } from './queue-url.ts';
import { connectRabbitMq } from './rabbitmq.ts';

export type { Broker, BrokerLog, SubscribeOptions } from './broker.ts';
export { type BrokerNames, brokerNames, DEFAULT_NAMESPACE, namespacedPublisher } from './names.ts';
export * from './outbox.ts';
export { type BrokerKind, brokerKindOf, QueueUrlError, redactedQueueUrl } from './queue-url.ts';

/** Connects to the broker `queueUrl` names and makes sure its queues (or stream and consumer) exist. */
export async function connectBroker(queueUrl: string, names: BrokerNames, log: BrokerLog): Promise<Broker> {
  const broker = await (brokerKindOf(queueUrl) === 'rabbitmq'
    ? connectRabbitMq(queueUrl, names, log)
    : connectNats(queueUrl, names, log));
  // The outbox holds destinations without the namespace (the web app writes them): put them in it here.
  return { ...broker, publisher: namespacedPublisher(broker.publisher, names) };
}
