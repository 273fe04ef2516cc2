/**
 * Everything the checkout creates on a broker, named after one namespace (QUEUE_NAMESPACE, default `idem`), so
 * that two deployments — or two test runs — can share a broker without taking each other's messages.
 */
import type { OutboxPublisher } from '@idem/idempotency/consumer';

export interface BrokerNames {
  namespace: string;
  /** The RabbitMQ queue, or the JetStream subject, of a message whose outbox destination is `destination`. */
  destination(destination: string): string;
  /** Where a message the consumer gave up on goes (RabbitMQ: a queue; JetStream: a subject of the same stream). */
  deadLetter(destination: string): string;
  /** The JetStream stream holding every subject of the namespace. */
  stream: string;
}

const NAMESPACE = /^[a-z][a-z0-9_-]{0,31}$/;

export const DEFAULT_NAMESPACE = 'idem';

export function brokerNames(namespace: string = DEFAULT_NAMESPACE): BrokerNames {
  if (!NAMESPACE.test(namespace))
    throw new RangeError(
      `a namespace must be 1–32 of a-z, 0-9, _ and -, starting with a letter; got ${JSON.stringify(namespace)}`,
    );
  return {
    namespace,
    destination: (destination) => `${namespace}.${destination}`,
    deadLetter: (destination) => `${namespace}.${destination}.dead`,
    stream: namespace.toUpperCase().replace(/-/g, '_'),
  };
}

/** `publisher` with each message's destination put in the namespace. */
export function namespacedPublisher(publisher: OutboxPublisher, names: BrokerNames): OutboxPublisher {
  return {
    publish: (messages) =>
      publisher.publish(
        messages.map((message) => ({ ...message, destination: names.destination(message.destination) })),
      ),
  };
}
