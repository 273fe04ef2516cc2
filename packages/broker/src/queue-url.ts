/** Which broker a `QUEUE_URL` names: `amqp://`/`amqps://` is RabbitMQ, `nats://`/`tls://` is NATS JetStream. */
export type BrokerKind = 'rabbitmq' | 'nats';

export class QueueUrlError extends Error {
  override name = 'QueueUrlError';
}

const KIND_BY_PROTOCOL: Readonly<Record<string, BrokerKind>> = {
  'amqp:': 'rabbitmq',
  'amqps:': 'rabbitmq',
  'nats:': 'nats',
  'tls:': 'nats',
};

export function brokerKindOf(queueUrl: string): BrokerKind {
  let protocol: string;
  try {
    protocol = new URL(queueUrl).protocol;
  } catch {
    throw new QueueUrlError('must be a URL: amqp://… (RabbitMQ) or nats://… (NATS JetStream)');
  }
  const kind = KIND_BY_PROTOCOL[protocol];
  if (!kind)
    throw new QueueUrlError(
      `${protocol} is not a broker Idem knows; use amqp:// or amqps:// (RabbitMQ), nats:// or tls:// (NATS JetStream)`,
    );
  return kind;
}

/** The URL without its password, for logs. */
export function redactedQueueUrl(queueUrl: string): string {
  const url = new URL(queueUrl);
  if (url.password) url.password = '***';
  return url.toString();
}
