/**
 * `pnpm bench:queues`: what the idempotent consumer's inbox costs on each broker, side by side in one run. Per
 * broker, three consumers drain the same preloaded queue through the same adapter, taking turns round by round:
 *
 *   raw    acks at once, touches no database: the broker's own ack rate through the adapter (the floor)
 *   plain  the handler's effect (one INSERT) in a transaction of its own: no inbox
 *   inbox  createIdempotentConsumer: the message id claimed in the effect's transaction
 *   fast   the same, its store on the fast path (withIdempotencyFastPath: the claim sent with BEGIN, prepared
 *          once per connection), as apps/web runs it
 *
 * and reports messages/s for each (the median of the rounds) and inbox ÷ plain, fast ÷ plain. Then the outbox relay's latency,
 * from the effect's COMMIT to the consumer holding the message (relay polling every BENCH_RELAY_IDLE_MS).
 *
 * Knobs (environment): DATABASE_URL (a Postgres server; a scratch database is made on it), AMQP_URL, NATS_URL,
 * BENCH_QUEUE_BROKERS (rabbitmq,jetstream), BENCH_QUEUE_MESSAGES (2000 per drain), BENCH_QUEUE_ROUNDS (3),
 * BENCH_QUEUE_PREFETCH (32: deliveries handled at once; the pool has as many connections), BENCH_RELAY_MESSAGES
 * (200), BENCH_RELAY_INTERVAL_MS (10: between two enqueues), BENCH_RELAY_IDLE_MS (50).
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient, type Database, pgAdapter } from '@idem/db';
import {
  createIdempotentConsumer,
  createOutbox,
  type MessageConsumer,
  type OutboxPublisher,
  outboxSchema,
} from '@idem/idempotency/consumer';
import { consumeJetStream, jetStreamPublisher } from '@idem/idempotency/consumer/jetstream';
import { consumeRabbitMq, rabbitMqPublisher } from '@idem/idempotency/consumer/rabbitmq';
import {
  createPrismaIdempotencyStore,
  idempotencyKeysSchema,
  withIdempotencyFastPath,
} from '@idem/idempotency/prisma';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers, nanos, connect as natsConnect } from '@nats-io/transport-node';
import amqp from 'amqplib';
import { createDatabase, dropDatabase, scratchDatabaseName, useExternalServer } from '../repository.ts';
import { closeEach, factoryOf, runStandalone } from '../standalone.ts';
import { formatMs, type LatencySummary, summarize } from '../storage/latency.ts';

const number = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const settings = {
  brokers: (process.env.BENCH_QUEUE_BROKERS ?? 'rabbitmq,jetstream').split(','),
  messages: number('BENCH_QUEUE_MESSAGES', 2_000),
  rounds: number('BENCH_QUEUE_ROUNDS', 3),
  prefetch: number('BENCH_QUEUE_PREFETCH', 32),
  relayMessages: number('BENCH_RELAY_MESSAGES', 200),
  relayIntervalMs: number('BENCH_RELAY_INTERVAL_MS', 10),
  relayIdleMs: number('BENCH_RELAY_IDLE_MS', 50),
};
const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const NATS_SERVERS = process.env.NATS_URL ?? '127.0.0.1:4222';

const ARMS = ['raw', 'plain', 'inbox', 'fast'] as const;
type Arm = (typeof ARMS)[number];

/** A broker as the bench drives it: a fresh queue preloaded with `messages`, drained by `consumer`. */
interface Broker {
  name: string;
  /** Makes a fresh queue holding `count` messages; resolves with a function that drains it with `consumer`. */
  preload(count: number): Promise<(consumer: MessageConsumer) => Promise<void>>;
  /** A consumer on a fresh queue, and the outbox publisher that feeds it: for the relay's latency. */
  relayTarget(
    consumer: MessageConsumer,
  ): Promise<{ publisher: OutboxPublisher; destination: string; stop(): Promise<void> }>;
  close(): Promise<void>;
}

const body = (index: number) =>
  Buffer.from(JSON.stringify({ orderId: `o-${index}`, lines: [1, 2, 3] }), 'utf8');

/** Resolves once `count` decisions were made. */
function counting(
  consumer: MessageConsumer,
  count: number,
): { consumer: MessageConsumer; done: Promise<void> } {
  let seen = 0;
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    done,
    consumer: {
      async handle(message) {
        const decision = await consumer.handle(message);
        seen += 1;
        if (seen === count) finish();
        return decision;
      },
    },
  };
}

async function rabbitmq(): Promise<Broker> {
  const connection = await amqp.connect(AMQP_URL);
  const admin = await connection.createChannel();
  const publisher = await connection.createConfirmChannel();
  const quorumQueue = async () => {
    const name = `idem-bench-${randomUUID().slice(0, 8)}`;
    await admin.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    return name;
  };
  return {
    name: 'RabbitMQ (quorum queue)',
    async preload(count) {
      const queue = await quorumQueue();
      for (let index = 0; index < count; index += 1)
        if (
          !publisher.sendToQueue(queue, body(index), {
            messageId: randomUUID(),
            type: 'order.ship',
            persistent: true,
          })
        )
          await new Promise((resolve) => publisher.once('drain', resolve));
      await publisher.waitForConfirms();
      return async (consumer) => {
        const channel = await connection.createChannel();
        const { consumer: counted, done } = counting(consumer, count);
        const consumption = await consumeRabbitMq({
          channel,
          queue,
          consumer: counted,
          prefetch: settings.prefetch,
        });
        await done;
        await consumption.stop();
        await channel.close();
        await admin.deleteQueue(queue);
      };
    },
    async relayTarget(consumer) {
      const queue = await quorumQueue();
      const channel = await connection.createChannel();
      const consumption = await consumeRabbitMq({ channel, queue, consumer, prefetch: settings.prefetch });
      return {
        publisher: rabbitMqPublisher({ channel: publisher }),
        destination: queue,
        async stop() {
          await consumption.stop();
          await channel.close();
          await admin.deleteQueue(queue);
        },
      };
    },
    close: () => connection.close(),
  };
}

async function natsJetStream(): Promise<Broker> {
  const nc = await natsConnect({ servers: NATS_SERVERS });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const stream = async () => {
    const name = `idem_bench_${randomUUID().slice(0, 8)}`;
    await jsm.streams.add({ name, subjects: [`${name}.>`] });
    await jsm.consumers.add(name, {
      durable_name: 'bench',
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(60_000),
    });
    return name;
  };
  const consume = async (name: string, consumer: MessageConsumer) => {
    const messages = await (await js.consumers.get(name, 'bench')).consume({
      max_messages: settings.prefetch,
    });
    const loop = consumeJetStream({ messages, consumer, concurrency: settings.prefetch });
    return async () => {
      await messages.close();
      await loop;
      await jsm.streams.delete(name);
    };
  };
  return {
    name: 'NATS JetStream (durable pull consumer)',
    async preload(count) {
      const name = await stream();
      for (let from = 0; from < count; from += 500) {
        const batch = Array.from({ length: Math.min(500, count - from) }, (_, offset) => {
          const set = headers();
          set.set('Idem-Message-Type', 'order.ship');
          return js.publish(`${name}.orders`, body(from + offset), { msgID: randomUUID(), headers: set });
        });
        await Promise.all(batch);
      }
      return async (consumer) => {
        const { consumer: counted, done } = counting(consumer, count);
        const stop = await consume(name, counted);
        await done;
        await stop();
      };
    },
    async relayTarget(consumer) {
      const name = await stream();
      const stop = await consume(name, consumer);
      return { publisher: jetStreamPublisher({ js, headers }), destination: `${name}.orders`, stop };
    },
    close: () => nc.close(),
  };
}

const BROKERS: Record<string, () => Promise<Broker>> = { rabbitmq, jetstream: natsJetStream };

/** The two clients: `db` as Prisma runs it, `fast` on the fast-path adapter (`adapter`). */
interface Clients {
  db: Database;
  fast: { db: Database; adapter: ReturnType<typeof withIdempotencyFastPath<ReturnType<typeof pgAdapter>>> };
}

function consumerFor(arm: Arm, { db, fast }: Clients): MessageConsumer {
  const effect = (tx: Pick<Database, '$executeRawUnsafe'>, id: string) =>
    tx.$executeRawUnsafe('insert into effects (message_id) values ($1)', id);
  if (arm === 'raw') return { handle: async () => ({ action: 'ack', outcome: 'executed' }) };
  if (arm === 'plain')
    return {
      async handle(message) {
        await db.$transaction((tx) => effect(tx, message.id));
        return { action: 'ack', outcome: 'executed' };
      },
    };
  return createIdempotentConsumer({
    store:
      arm === 'fast'
        ? createPrismaIdempotencyStore(fast.db, { fastPath: fast.adapter })
        : createPrismaIdempotencyStore(db),
    name: 'bench',
    handler: async (message, tx) => {
      await effect(tx, message.id);
    },
  });
}

interface BrokerFigures {
  broker: string;
  /** Messages per second, one per round, per arm. */
  rates: Record<Arm, number[]>;
  relay: LatencySummary;
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN;
};

async function measure(broker: Broker, clients: Clients): Promise<BrokerFigures> {
  const { db } = clients;
  const rates: Record<Arm, number[]> = { raw: [], plain: [], inbox: [], fast: [] };
  for (let round = 0; round < settings.rounds; round += 1) {
    // Each round in another order, so that no arm always runs on a warmer (or more loaded) machine.
    const order = ARMS.map((_, index) => ARMS[(index + round) % ARMS.length] as Arm);
    for (const arm of order) {
      const drain = await broker.preload(settings.messages);
      const started = performance.now();
      await drain(consumerFor(arm, clients));
      const seconds = (performance.now() - started) / 1000;
      rates[arm].push(settings.messages / seconds);
      console.log(
        `[bench:queues] ${broker.name}, round ${round + 1}, ${arm}: ${(settings.messages / seconds).toFixed(0)} msg/s`,
      );
    }
  }

  // The relay: enqueue one message at a time; latency = the consumer holding it − its transaction's commit.
  const table = `outbox_${randomUUID().slice(0, 8)}`;
  for (const statement of outboxSchema(table).statements) await db.$executeRawUnsafe(statement);
  const outbox = createOutbox(db, { table });
  const committed = new Map<string, number>();
  const latencies: number[] = [];
  let received: () => void = () => {};
  const all = new Promise<void>((resolve) => {
    received = resolve;
  });
  const inbox = consumerFor('inbox', clients);
  const target = await broker.relayTarget({
    async handle(message) {
      const at = committed.get(message.id);
      if (at !== undefined) latencies.push(performance.now() - at);
      if (latencies.length === settings.relayMessages) received();
      return inbox.handle(message);
    },
  });
  const relay = outbox.startRelay(target.publisher, { idleMs: settings.relayIdleMs });
  for (let index = 0; index < settings.relayMessages; index += 1) {
    const id = randomUUID();
    await db.$transaction((tx) =>
      outbox.enqueue(tx, {
        id,
        type: 'order.ship',
        destination: target.destination,
        body: { orderId: `o-${index}` },
      }),
    );
    committed.set(id, performance.now());
    await new Promise((resolve) => setTimeout(resolve, settings.relayIntervalMs));
  }
  await all;
  await relay.stop();
  await target.stop();
  await db.$executeRawUnsafe(`drop table ${table}`);
  return { broker: broker.name, rates, relay: summarize(latencies) };
}

function table(results: BrokerFigures[]): string {
  const rows = results.map(({ broker, rates, relay }) => {
    const [raw, plain, inbox, fast] = [rates.raw, rates.plain, rates.inbox, rates.fast].map(median) as [
      number,
      number,
      number,
      number,
    ];
    return `| ${broker} | ${raw.toFixed(0)} | ${plain.toFixed(0)} | ${inbox.toFixed(0)} (**${(inbox / plain).toFixed(2)}×**) | ${fast.toFixed(0)} (**${(fast / plain).toFixed(2)}×**) | ${formatMs(relay.p50)} / ${formatMs(relay.p99)} |`;
  });
  return [
    '| broker | raw acks/s (the floor) | without the inbox, msg/s | with the inbox, msg/s (÷ without) | with the inbox, fast path (÷ without) | outbox relay, commit → consumer: p50 / p99 ms |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    `- ${settings.messages} preloaded messages per drain, ${settings.prefetch} handled at once (the Postgres pool as large), the median of ${settings.rounds} rounds, the arms taking turns. Effect: one INSERT; inbox: the claim, which writes the row completed, in the effect's transaction.`,
    `- Relay: ${settings.relayMessages} messages enqueued one by one, ${settings.relayIntervalMs} ms apart; the relay polls every ${settings.relayIdleMs} ms when idle.`,
  ].join('\n');
}

const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
const name = scratchDatabaseName('idem_bench_queues');
const url = await createDatabase(server.adminUrl, name);
const db = createPrismaClient({ connectionString: url, max: settings.prefetch });
const adapter = withIdempotencyFastPath(pgAdapter({ connectionString: url, max: settings.prefetch }));
const clients: Clients = { db, fast: { db: createPrismaClient({ adapter }), adapter } };
const opened: Broker[] = [];
await runStandalone(
  'bench:queues',
  async () => {
    for (const statement of idempotencyKeysSchema().statements) await db.$executeRawUnsafe(statement);
    await db.$executeRawUnsafe('create table effects (seq bigserial primary key, message_id text not null)');
    const results: BrokerFigures[] = [];
    for (const id of settings.brokers) {
      const broker = await factoryOf(BROKERS, 'broker', id)();
      opened.push(broker);
      results.push(await measure(broker, clients));
    }
    return { table: table(results), results };
  },
  async () => {
    await closeEach(opened);
    await db.$disconnect();
    await clients.fast.db.$disconnect();
    await dropDatabase(server.adminUrl, name);
  },
);
