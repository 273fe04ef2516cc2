/**
 * NATS JetStream onto the consumer core, and a publisher for the outbox relay. Structural: written against
 * `@nats-io/jetstream`'s `JsMsg` and `JetStreamClient` (any object with the same members fits), so nothing
 * here imports a client at runtime.
 *
 * The consumer is a durable pull consumer with explicit acks: a message not acked within its AckWait is
 * redelivered, and `info.deliveryCount` counts the deliveries. The message id is the `Nats-Msg-Id` header the
 * publisher set, which JetStream also dedupes publishes by within the stream's duplicate window.
 */
import type { ConsumerDecision, MessageConsumer, QueueMessage } from '../message.ts';
import type { OutboxPublisher, OutboxRecord } from '../outbox.ts';

/** The header JetStream dedupes publishes by, and the consumer's message id. */
export const NATS_MSG_ID_HEADER = 'Nats-Msg-Id';
/** The message type, set by `jetStreamPublisher`; without it, the subject is the type. */
export const MESSAGE_TYPE_HEADER = 'Idem-Message-Type';

/** The part of a `JsMsg` the adapter reads and settles. */
export interface JetStreamDelivery {
  readonly data: Uint8Array;
  readonly subject: string;
  readonly headers?: { get(name: string): string; keys(): string[] } | undefined;
  readonly info: { readonly deliveryCount: number };
  ack(): void;
  nak(millis?: number): void;
  term(): void;
}

export interface JetStreamConsumeOptions<TDelivery extends JetStreamDelivery> {
  /** What `consumer.consume()` (of `js.consumers.get(stream, durable)`) returns, or any iterable of messages. */
  messages: AsyncIterable<TDelivery>;
  /** `createIdempotentConsumer(…)`, or any `MessageConsumer`. */
  consumer: MessageConsumer;
  /** Messages handled at once. Default 10. */
  concurrency?: number;
  /**
   * Called before a message is terminated (`term`): e.g. publish it to a dead-letter subject. Without it the
   * message is only terminated (JetStream sends a MSG_TERMINATED advisory) and stays in the stream.
   */
  deadLetter?: (
    delivery: TDelivery,
    decision: Extract<ConsumerDecision, { action: 'dead-letter' }>,
  ) => Promise<void>;
  /** A settlement that failed (the connection closed under it): JetStream redelivers after AckWait. */
  onError?: (error: unknown) => void;
}

/** A delivery as the consumer core sees it. */
export function jetStreamMessage(delivery: JetStreamDelivery): QueueMessage {
  const headers: Record<string, string> = {};
  for (const name of delivery.headers?.keys() ?? []) headers[name] = delivery.headers?.get(name) ?? '';
  return {
    id: headers[NATS_MSG_ID_HEADER] ?? '',
    type: headers[MESSAGE_TYPE_HEADER] || delivery.subject,
    body: delivery.data,
    deliveryCount: delivery.info.deliveryCount,
    headers,
  };
}

/**
 * Handles every message of `messages` (at most `concurrency` at once): ack after commit, nak with the retry
 * delay, term to dead-letter. Resolves when the iterable ends (`messages.stop()` or `close()`) and every
 * message taken from it is settled.
 */
export async function consumeJetStream<TDelivery extends JetStreamDelivery>(
  options: JetStreamConsumeOptions<TDelivery>,
): Promise<void> {
  const { consumer } = options;
  const concurrency = options.concurrency ?? 10;
  const onError = options.onError ?? (() => {});
  const handling = new Set<Promise<void>>();

  const settle = async (delivery: TDelivery, decision: ConsumerDecision) => {
    try {
      if (decision.action === 'ack') delivery.ack();
      else if (decision.action === 'retry') delivery.nak(decision.delayMs);
      else {
        await options.deadLetter?.(delivery, decision);
        // Without a reason: a server before 2.10 does not take `+TERM <reason>` for a TERM, and redelivers.
        delivery.term();
      }
    } catch (error) {
      onError(error);
    }
  };

  for await (const delivery of options.messages) {
    const handled = consumer.handle(jetStreamMessage(delivery)).then(
      (decision) => settle(delivery, decision),
      // A consumer that broke its promise never to reject: redelivered after a second.
      (error: unknown) => settle(delivery, { action: 'retry', delayMs: 1_000, error }),
    );
    handling.add(handled);
    void handled.finally(() => handling.delete(handled));
    if (handling.size >= concurrency) await Promise.race(handling);
  }
  await Promise.all(handling);
}

/** The part of a `JetStreamClient` the publisher uses. */
export interface JetStreamPublishClient<THeaders> {
  publish(
    subject: string,
    payload: Uint8Array,
    options: { msgID: string; headers: THeaders },
  ): Promise<{ duplicate: boolean }>;
}

export interface JetStreamPublisherOptions<THeaders extends { set(name: string, value: string): void }> {
  /** `jetstream(nc)`. */
  js: JetStreamPublishClient<NoInfer<THeaders>>;
  /** `headers` from `@nats-io/transport-node` (or `@nats-io/nats-core`): makes an empty header set. */
  headers: () => THeaders;
}

/**
 * The outbox relay's publisher: each message to its destination subject with `Nats-Msg-Id` = the outbox id (so
 * JetStream drops a republish within the stream's duplicate window) and its type in `Idem-Message-Type`;
 * resolves once JetStream acknowledged every publish (a duplicate's acknowledgement included).
 */
export function jetStreamPublisher<THeaders extends { set(name: string, value: string): void }>(
  options: JetStreamPublisherOptions<THeaders>,
): OutboxPublisher {
  const encoder = new TextEncoder();
  return {
    async publish(messages: readonly OutboxRecord[]) {
      await Promise.all(
        messages.map((message) => {
          const headers = options.headers();
          for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
          headers.set(MESSAGE_TYPE_HEADER, message.type);
          return options.js.publish(message.destination, encoder.encode(message.body), {
            msgID: message.id,
            headers,
          });
        }),
      );
    },
  };
}
