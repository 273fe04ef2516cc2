/**
 * NATS JetStream for the checkout: one stream holding the namespace's subjects (file storage, so a restarted
 * server keeps what it had), a durable pull consumer on the fulfilment subject, and dead letters published to a
 * subject of the same stream. The client reconnects by itself, for ever; a `consume()` resumes pulling once it
 * is back, and a message not acknowledged within AckWait is delivered again.
 */
import type { MessageConsumer } from '@idem/idempotency/consumer';
import { consumeJetStream, jetStreamPublisher } from '@idem/idempotency/consumer/jetstream';
import {
  AckPolicy,
  type ConsumerMessages,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { connect, headers, nanos } from '@nats-io/transport-node';
import { type Broker, type BrokerLog, reconnectDelayMs } from './broker.ts';
import { FulfilmentMessage } from './fulfilment-messages.ts';
import type { BrokerNames } from './names.ts';

/** The durable consumer's name; AckWait: a delivery not settled within it is delivered again. */
const DURABLE = FulfilmentMessage.type;
const ACK_WAIT_SECONDS = 60;

async function ensureTopology(jsm: JetStreamManager, names: BrokerNames): Promise<void> {
  const subjects = [`${names.namespace}.>`];
  try {
    await jsm.streams.info(names.stream);
  } catch {
    await jsm.streams.add({ name: names.stream, subjects });
  }
  try {
    await jsm.consumers.info(names.stream, DURABLE);
  } catch {
    await jsm.consumers.add(names.stream, {
      durable_name: DURABLE,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(ACK_WAIT_SECONDS * 1_000),
      filter_subject: names.destination(FulfilmentMessage.destination),
      // The consumer core dead-letters after its own count of deliveries; JetStream never gives up first.
      max_deliver: -1,
    });
  }
}

/** The client's URL form: `nats://host:port` (credentials in the URL are taken by the client). */
export async function connectNats(url: string, names: BrokerNames, log: BrokerLog): Promise<Broker> {
  const connection = await connect({
    servers: url,
    name: `idem-worker-${names.namespace}`,
    maxReconnectAttempts: -1,
    reconnectTimeWait: reconnectDelayMs(1),
  });
  void (async () => {
    for await (const status of connection.status()) {
      if (status.type === 'disconnect') log.warn('NATS connection lost; reconnecting');
      else if (status.type === 'reconnect') log.info('NATS reconnected');
    }
  })();
  try {
    await ensureTopology(await jetstreamManager(connection), names);
  } catch (error) {
    await connection.close().catch(() => {});
    throw error;
  }
  const js = jetstream(connection);
  let messages: ConsumerMessages | undefined;
  let consuming: Promise<void> | undefined;

  return {
    kind: 'nats',
    publisher: jetStreamPublisher({ js, headers }),
    async subscribeFulfilment(consumer: MessageConsumer, options) {
      if (messages) throw new Error('subscribeFulfilment: this broker already has a subscription');
      const durable = await js.consumers.get(names.stream, DURABLE);
      messages = await durable.consume({ max_messages: options.concurrency * 2 });
      consuming = consumeJetStream({
        messages,
        consumer,
        concurrency: options.concurrency,
        deadLetter: async (delivery) => {
          await js.publish(names.deadLetter(FulfilmentMessage.destination), delivery.data, {
            headers: delivery.headers,
          });
        },
        onError: (error) =>
          log.warn('JetStream: a settlement failed; the message comes back after AckWait', error),
      }).catch((error: unknown) => log.warn('JetStream: the subscription ended', error));
    },
    async close() {
      await messages?.close().catch(() => {});
      await consuming;
      await connection.drain().catch(() => {});
    },
  };
}
