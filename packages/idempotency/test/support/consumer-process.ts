/**
 * A consumer in a process of its own, as a deployment runs one: it consumes a RabbitMQ queue or a JetStream
 * durable and prints one line per delivery (`handled <id> <outcome>`). With DIE_AFTER_COMMIT=1 it SIGKILLs itself
 * after its first delivery's effect has committed and before the adapter can ack it (`committed <id>`): what a
 * crash, an OOM kill or a lost host does between the COMMIT and the ack.
 *
 * DATABASE_URL (the test's scratch schema), NAME (the consumer's name: its inbox scope and its effects' label),
 * MODE = protected (the inbox) | control (test side: the same effect, no inbox), BROKER = rabbitmq (QUEUE) |
 * jetstream (STREAM, DURABLE).
 */
import { writeSync } from 'node:fs';
import { createPrismaClient } from '@idem/db';
import { jetstream } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import amqp from 'amqplib';
import { createIdempotentConsumer, type MessageConsumer } from '../../src/consumer/index.ts';
import { consumeJetStream } from '../../src/consumer/jetstream/index.ts';
import { consumeRabbitMq } from '../../src/consumer/rabbitmq/index.ts';
import { createPrismaIdempotencyStore } from '../../src/prisma/index.ts';
import { AMQP_URL, NATS_SERVERS } from './brokers.ts';
import { plainConsumer, recordEffect } from './queue.ts';

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};

const name = env('NAME');
const db = createPrismaClient({ connectionString: env('DATABASE_URL'), max: 2 });
const inner: MessageConsumer =
  env('MODE') === 'protected'
    ? createIdempotentConsumer({
        store: createPrismaIdempotencyStore(db),
        name,
        handler: (message, tx) => recordEffect(tx, name, message),
        onAnomaly: () => {},
      })
    : plainConsumer(db, (message, tx) => recordEffect(tx, name, message));
const dieAfterCommit = process.env.DIE_AFTER_COMMIT === '1';

const consumer: MessageConsumer = {
  async handle(message) {
    const decision = await inner.handle(message);
    const outcome = decision.action === 'ack' ? decision.outcome : decision.action;
    if (dieAfterCommit && outcome === 'executed') {
      // Written and killed synchronously: a process that lived on until its write was flushed could be handed the
      // redelivery after AckWait, answer it as a duplicate and ack it itself (a loaded CI run: the broker showed
      // three deliveries, nothing pending, and the next process never saw the message).
      writeSync(1, `committed ${message.id}\n`);
      process.kill(process.pid, 'SIGKILL');
      // Never settles: the process dies before the adapter acks.
      await new Promise(() => {});
    }
    process.stdout.write(`handled ${message.id} ${outcome}\n`);
    return decision;
  },
};

if (env('BROKER') === 'rabbitmq') {
  const connection = await amqp.connect(AMQP_URL);
  await consumeRabbitMq({
    channel: await connection.createChannel(),
    queue: env('QUEUE'),
    consumer,
    prefetch: 5,
  });
  process.stdout.write('ready\n');
} else {
  const nc = await natsConnect({ servers: NATS_SERVERS });
  // Pull requests that expire in 5 s (not 30): a killed process's open request, which the server may still
  // hand a redelivery to, is gone within a few AckWaits.
  const messages = await (await jetstream(nc).consumers.get(env('STREAM'), env('DURABLE'))).consume({
    max_messages: 10,
    expires: 5_000,
  });
  process.stdout.write('ready\n');
  await consumeJetStream({ messages, consumer, concurrency: 5 });
}
