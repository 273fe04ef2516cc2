/**
 * One outbox relay pass in a process of its own that SIGKILLs itself between the publish and the mark: its
 * publisher publishes the batch, waits for the broker's confirms, prints `published`, and kills its own process
 * before the relay's UPDATE … sent_at and COMMIT. The rows stay unsent; the next relay publishes them again.
 *
 * DATABASE_URL (the test's scratch schema), OUTBOX_TABLE, BROKER = rabbitmq (EXCHANGE) | jetstream.
 * PUBLISH = plain (JetStream only, the CONTROL, test side): published without `Nats-Msg-Id`, the id in the
 * `Idem-Control-Id` header instead, so JetStream has nothing to dedupe by.
 */
import { createPrismaClient } from '@idem/db';
import { jetstream } from '@nats-io/jetstream';
import { headers, connect as natsConnect } from '@nats-io/transport-node';
import amqp from 'amqplib';
import { createOutbox, type OutboxPublisher } from '../../src/consumer/index.ts';
import { jetStreamPublisher } from '../../src/consumer/jetstream/index.ts';
import { rabbitMqPublisher } from '../../src/consumer/rabbitmq/index.ts';
import { AMQP_URL, NATS_SERVERS, plainJetStreamPublisher } from './brokers.ts';

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};

const db = createPrismaClient({ connectionString: env('DATABASE_URL'), max: 1 });
const outbox = createOutbox(db, { table: env('OUTBOX_TABLE') });

let publisher: OutboxPublisher;
if (env('BROKER') === 'rabbitmq') {
  const connection = await amqp.connect(AMQP_URL);
  publisher = rabbitMqPublisher({
    channel: await connection.createConfirmChannel(),
    exchange: env('EXCHANGE'),
  });
} else {
  const js = jetstream(await natsConnect({ servers: NATS_SERVERS }));
  publisher =
    process.env.PUBLISH === 'plain' ? plainJetStreamPublisher(js) : jetStreamPublisher({ js, headers });
}

await outbox.relayBatch({
  async publish(messages) {
    await publisher.publish(messages);
    process.stdout.write('published\n', () => process.kill(process.pid, 'SIGKILL'));
    // Never settles: the process dies before the relay can mark anything sent.
    await new Promise(() => {});
  },
});
throw new Error('the relay marked its batch sent: it should have been killed first');
