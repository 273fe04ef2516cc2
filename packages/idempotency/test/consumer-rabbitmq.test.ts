/**
 * The idempotent consumer and the outbox on a real RabbitMQ (quorum queues, manual acks, publisher confirms) and
 * Postgres, fault by fault. Each protected run has a CONTROL built here, on the test side: the same deliveries
 * through a consumer without the inbox (support/queue.ts), which shows the duplicate effect the inbox prevents.
 * Most tests publish through a fanout exchange to two queues, one per consumer, so that the protected consumer and
 * its control see the very same deliveries. Queue and exchange names are unique per test and deleted after it.
 */
import { createPrismaClient, type Database } from '@idem/db';
import amqp, { type Channel, type ChannelModel, type ConfirmChannel } from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsumerAnomaly,
  createIdempotentConsumer,
  createOutbox,
  fingerprintBody,
  type MessageConsumer,
  outboxSchema,
} from '../src/consumer/index.ts';
import { consumeRabbitMq, rabbitMqPublisher } from '../src/consumer/rabbitmq/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { AMQP_URL, relayThatDiesBeforeTheMark } from './support/brokers.ts';
import { deferred, ownTableUrl } from './support/db.ts';
import {
  type Decided,
  EFFECTS_DDL,
  effectCount,
  effectsOf,
  json,
  plainConsumer,
  recordEffect,
  recording,
  unique,
} from './support/queue.ts';

let url: string;
let db: Database;
let connection: ChannelModel;
let admin: Channel;
let publisher: ConfirmChannel;
const cleanups: Array<() => Promise<unknown>> = [];
/** Measured counts, printed once at the end (docs/RELIABILITY.md). */
const report: string[] = [];

beforeAll(async () => {
  url = await ownTableUrl();
  db = createPrismaClient({ connectionString: url, max: 8 });
  await db.$executeRawUnsafe(EFFECTS_DDL);
  connection = await openConnection();
  admin = await connection.createChannel();
  publisher = await connection.createConfirmChannel();
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});
afterAll(async () => {
  await connection?.close();
  await db?.$disconnect();
  if (report.length) console.log(`RabbitMQ fault tests (protected / control):\n  ${report.join('\n  ')}`);
});

async function openConnection(): Promise<ChannelModel> {
  const opened = await amqp.connect(AMQP_URL);
  // A connection closed under a test (the crash) may report it; the test looks at what was delivered instead.
  opened.on('error', () => {});
  return opened;
}

async function quorumQueue(prefix: string, args: Record<string, string> = {}): Promise<string> {
  const name = unique(prefix);
  await admin.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum', ...args } });
  cleanups.push(() => admin.deleteQueue(name));
  return name;
}

/** A fanout exchange to `queues`: every publish reaches each of them. */
async function fanout(...queues: string[]): Promise<string> {
  const name = unique('idem-test-fanout');
  await admin.assertExchange(name, 'fanout', { durable: false });
  for (const queue of queues) await admin.bindQueue(queue, name, '');
  cleanups.push(() => admin.deleteExchange(name));
  return name;
}

/** Publishes (with confirms) `id` with `body`, to `exchange` (or, through the default exchange, to the queue `routingKey`). */
async function publish(exchange: string, routingKey: string, id: string, body: unknown) {
  publisher.publish(exchange, routingKey, json(body), {
    messageId: id,
    type: 'order.ship',
    persistent: true,
  });
  await publisher.waitForConfirms();
}

/** Consumes `queue` with `consumer` on a connection of its own (closed after the test). */
async function consume(
  queue: string,
  consumer: MessageConsumer,
  options: { prefetch?: number; connection?: ChannelModel; onError?: (error: unknown) => void } = {},
) {
  const own = options.connection ?? (await openConnection());
  const channel = await own.createChannel();
  channel.on('error', () => {});
  const consumption = await consumeRabbitMq({
    channel,
    queue,
    consumer,
    prefetch: options.prefetch ?? 10,
    onError: options.onError,
  });
  cleanups.push(async () => {
    await consumption.stop().catch(() => {});
    await own.close().catch(() => {});
  });
  return { connection: own, consumption };
}

/** The consumer under test: the inbox on the Postgres key table, the effect one row in `effects`. */
function idempotent(
  name: string,
  options: { db?: Database; onAnomaly?: (anomaly: ConsumerAnomaly) => void } = {},
) {
  const on = options.db ?? db;
  return createIdempotentConsumer({
    store: createPrismaIdempotencyStore(on),
    name,
    handler: (message, tx) => recordEffect(tx, name, message),
    onAnomaly: options.onAnomaly ?? (() => {}),
  });
}

/** CONTROL: the same effect, no inbox. */
function control(name: string) {
  return plainConsumer(db, (message, tx) => recordEffect(tx, name, message));
}

const outcomes = (log: Decided[]) =>
  log.map(({ decision }) => (decision.action === 'ack' ? decision.outcome : decision.action));

describe('RabbitMQ: the idempotent consumer', () => {
  it('the same message published twice: one effect (CONTROL without the inbox: two)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const [protectedQueue, controlQueue] = [await quorumQueue('idem-p'), await quorumQueue('idem-c')];
    const exchange = await fanout(protectedQueue, controlQueue);
    const protectedLog: Decided[] = [];
    const controlLog: Decided[] = [];
    await consume(protectedQueue, recording(idempotent(name), protectedLog));
    await consume(controlQueue, recording(control(controlName), controlLog));

    const id = unique('m');
    await publish(exchange, '', id, { orderId: 'o-1' });
    await publish(exchange, '', id, { orderId: 'o-1' });
    await expect.poll(() => protectedLog.length + controlLog.length).toBe(4);

    expect(outcomes(protectedLog)).toEqual(['executed', 'duplicate']);
    expect(await effectsOf(db, name)).toEqual(new Map([[id, 1]]));
    expect(await effectsOf(db, controlName)).toEqual(new Map([[id, 2]]));
    report.push('same message published twice: 1 effect / 2');
  });

  it('a consumer that dies after the commit, before the ack (its connection closed): redelivered, one effect (CONTROL: two)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const [protectedQueue, controlQueue] = [await quorumQueue('idem-p'), await quorumQueue('idem-c')];
    const exchange = await fanout(protectedQueue, controlQueue);
    const runs = [
      {
        queue: protectedQueue,
        consumer: idempotent(name),
        log: [] as Decided[],
        died: deferred(),
        ackErrors: [] as unknown[],
      },
      {
        queue: controlQueue,
        consumer: control(controlName),
        log: [] as Decided[],
        died: deferred(),
        ackErrors: [] as unknown[],
      },
    ];
    for (const run of runs) {
      const doomed = await openConnection();
      // The first consumer commits the effect, then its connection goes before the adapter can ack.
      const dying: MessageConsumer = {
        async handle(message) {
          const decision = await run.consumer.handle(message);
          await doomed.close();
          run.died.resolve();
          return decision;
        },
      };
      await consume(run.queue, dying, { connection: doomed, onError: (error) => run.ackErrors.push(error) });
    }
    const id = unique('m');
    await publish(exchange, '', id, { orderId: 'o-1' });
    for (const run of runs) {
      await run.died.promise;
      await consume(run.queue, recording(run.consumer, run.log));
    }
    await expect.poll(() => runs.every((run) => run.log.length === 1)).toBe(true);

    const [protectedRun, controlRun] = runs;
    // The redelivery, counted by the quorum queue.
    expect(protectedRun?.log.map(({ message }) => message.deliveryCount)).toEqual([2]);
    expect(protectedRun?.ackErrors).toHaveLength(1);
    expect(outcomes(protectedRun?.log ?? [])).toEqual(['duplicate']);
    expect(await effectsOf(db, name)).toEqual(new Map([[id, 1]]));
    expect(outcomes(controlRun?.log ?? [])).toEqual(['executed']);
    expect(await effectsOf(db, controlName)).toEqual(new Map([[id, 2]]));
    report.push('consumer killed after commit, before ack: 1 effect / 2');
  });

  it('three consumers on one queue, 100 messages each published twice: exactly one effect per id, none lost (CONTROL: two per id)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const [protectedQueue, controlQueue] = [await quorumQueue('idem-p'), await quorumQueue('idem-c')];
    const exchange = await fanout(protectedQueue, controlQueue);
    const protectedLogs: Decided[][] = [[], [], []];
    const controlLog: Decided[] = [];
    for (const log of protectedLogs) {
      // Each consumer as if in a process of its own: its own connection, pool and store, so the duplicates meet
      // on the key table's unique index, not in one process's memory.
      const own = createPrismaClient({ connectionString: url, max: 3 });
      cleanups.push(() => own.$disconnect());
      const { connection: shared } = await consume(
        protectedQueue,
        recording(idempotent(name, { db: own }), log),
      );
      await consume(controlQueue, recording(control(controlName), controlLog), { connection: shared });
    }
    const ids = Array.from({ length: 100 }, () => unique('m'));
    // Each id's two copies one after the other, so that two consumers often hold them at the same moment.
    for (const id of ids)
      for (const _copy of [1, 2])
        publisher.publish(exchange, '', json({ id }), {
          messageId: id,
          type: 'order.ship',
          persistent: true,
        });
    await publisher.waitForConfirms();
    // Delivered at least once: a delivery that waited past its lock timeout on a copy's row lock is released
    // and delivered again (a loaded CI run had 15 such retries), so count acknowledgements — one per copy.
    const acked = (log: Decided[]) => outcomes(log).filter((outcome) => outcome !== 'retry');
    // 400 deliveries, some of them twice or more: a loaded CI run (2026-12-04, run 30) had 387 after the default
    // 15 s. A generous bound that only a hang reaches.
    await expect
      .poll(() => acked(protectedLogs.flat()).length + acked(controlLog).length, { timeout: 90_000 })
      .toBe(400);

    const protectedEffects = await effectsOf(db, name);
    expect([...protectedEffects.keys()].sort()).toEqual([...ids].sort());
    expect([...protectedEffects.values()].every((n) => n === 1)).toBe(true);
    const all = acked(protectedLogs.flat());
    expect(all.filter((outcome) => outcome === 'executed')).toHaveLength(100);
    expect(all.filter((outcome) => outcome === 'duplicate')).toHaveLength(100);
    const controlEffects = await effectsOf(db, controlName);
    expect(controlEffects.size).toBe(100);
    expect([...controlEffects.values()].every((n) => n === 2)).toBe(true);
    report.push(
      `three consumers, 100 ids × 2 copies: 100 effects (per consumer ${protectedLogs.map((log) => log.length).join('/')} deliveries) / ${await effectCount(db, controlName)}`,
    );
  }, 150_000);

  it('a poison message is dead-lettered after N = 3 deliveries, with no effect (CONTROL without the limit: delivered again and again)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const deadLetters = await quorumQueue('idem-dlq');
    const protectedQueue = await quorumQueue('idem-p', {
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': deadLetters,
    });
    const controlQueue = await quorumQueue('idem-c');
    const failing = async () => {
      throw new Error('cannot ship to the moon');
    };
    const protectedLog: Decided[] = [];
    const controlLog: Decided[] = [];
    const poison = createIdempotentConsumer({
      store: createPrismaIdempotencyStore(db),
      name,
      maxDeliveries: 3,
      backoff: { initialMs: 1, maxMs: 1 },
      handler: async (message, tx) => {
        await recordEffect(tx, name, message);
        await failing();
      },
    });
    await consume(protectedQueue, recording(poison, protectedLog));
    const { consumption: controlConsumption } = await consume(
      controlQueue,
      recording(
        plainConsumer(db, async (message, tx) => {
          await recordEffect(tx, controlName, message);
          await failing();
        }),
        controlLog,
      ),
    );
    const id = unique('m');
    await publish('', protectedQueue, id, { orderId: 'moon' });
    await expect.poll(async () => (await admin.checkQueue(deadLetters)).messageCount).toBe(1);
    expect(protectedLog.map(({ message }) => message.deliveryCount)).toEqual([1, 2, 3]);
    expect(outcomes(protectedLog)).toEqual(['retry', 'retry', 'dead-letter']);
    expect(protectedLog[2]?.decision).toMatchObject({ reason: 'max-deliveries' });
    const dead = await admin.get(deadLetters, { noAck: true });
    expect(dead ? dead.properties.messageId : null).toBe(id);
    expect(await effectCount(db, name)).toBe(0);

    await publish('', controlQueue, id, { orderId: 'moon' });
    await expect.poll(() => controlLog.length >= 6).toBe(true);
    await controlConsumption.stop();
    expect(controlLog.slice(0, 6).map(({ message }) => message.deliveryCount)).toEqual([1, 2, 3, 4, 5, 6]);
    report.push(
      `poison message, N = 3: dead-lettered after 3 deliveries, 0 effects / still redelivered at ${controlLog.length}`,
    );
  });

  it('a redelivered id with another body: not executed, reported (CONTROL: executed)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const [protectedQueue, controlQueue] = [await quorumQueue('idem-p'), await quorumQueue('idem-c')];
    const exchange = await fanout(protectedQueue, controlQueue);
    const anomalies: ConsumerAnomaly[] = [];
    const protectedLog: Decided[] = [];
    const controlLog: Decided[] = [];
    await consume(
      protectedQueue,
      recording(idempotent(name, { onAnomaly: (a) => anomalies.push(a) }), protectedLog),
    );
    await consume(controlQueue, recording(control(controlName), controlLog));

    const id = unique('m');
    await publish(exchange, '', id, { orderId: 'o-1' });
    await expect.poll(() => protectedLog.length + controlLog.length).toBe(2);
    await publish(exchange, '', id, { orderId: 'o-2' });
    await expect.poll(() => protectedLog.length + controlLog.length).toBe(4);

    expect(outcomes(protectedLog)).toEqual(['executed', 'anomaly']);
    expect(anomalies).toEqual([
      expect.objectContaining({
        consumer: name,
        id,
        fingerprint: fingerprintBody(json({ orderId: 'o-2' })),
        storedFingerprint: fingerprintBody(json({ orderId: 'o-1' })),
      }),
    ]);
    const bodies = await db.$queryRawUnsafe<Array<{ body: string }>>(
      'select body from effects where consumer = $1 order by seq',
      name,
    );
    expect(bodies.map((row) => row.body)).toEqual(['{"orderId":"o-1"}']);
    expect(await effectsOf(db, controlName)).toEqual(new Map([[id, 2]]));
    report.push('redelivered id, another body: not run, 1 anomaly reported, 1 effect / 2');
  });
});

describe('RabbitMQ: the outbox', () => {
  it('a relay SIGKILLed between the confirm and the mark publishes again on restart: one effect (CONTROL: two)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const table = unique('outbox').replace('-', '_');
    for (const statement of outboxSchema(table).statements) await db.$executeRawUnsafe(statement);
    cleanups.push(() => db.$executeRawUnsafe(`drop table ${table}`));
    const outbox = createOutbox(db, { table });
    const [protectedQueue, controlQueue] = [await quorumQueue('idem-p'), await quorumQueue('idem-c')];
    const exchange = await fanout(protectedQueue, controlQueue);
    const protectedLog: Decided[] = [];
    const controlLog: Decided[] = [];
    await consume(protectedQueue, recording(idempotent(name), protectedLog));
    await consume(controlQueue, recording(control(controlName), controlLog));

    // The effect's transaction: the order row would be written here, the message with it.
    const id = await db.$transaction((tx) =>
      outbox.enqueue(tx, { type: 'order.ship', destination: 'orders', body: { orderId: 'o-1' } }),
    );
    await relayThatDiesBeforeTheMark({
      DATABASE_URL: url,
      OUTBOX_TABLE: table,
      BROKER: 'rabbitmq',
      EXCHANGE: exchange,
    });
    await expect.poll(() => protectedLog.length + controlLog.length).toBe(2);
    expect(await outbox.countUnsent()).toBe(1);

    // The relay again (its dead predecessor's row lock goes with its connection: until then SKIP LOCKED skips it).
    const relay = rabbitMqPublisher({ channel: publisher, exchange });
    await expect.poll(() => outbox.relayBatch(relay)).toBe(1);
    expect(await outbox.countUnsent()).toBe(0);
    await expect.poll(() => protectedLog.length + controlLog.length).toBe(4);

    expect(protectedLog.map(({ message }) => message.id)).toEqual([id, id]);
    expect(outcomes(protectedLog)).toEqual(['executed', 'duplicate']);
    expect(await effectsOf(db, name)).toEqual(new Map([[id, 1]]));
    expect(await effectsOf(db, controlName)).toEqual(new Map([[id, 2]]));
    report.push('relay killed between confirm and mark: published twice, 1 effect / 2');
  });

  it('enqueue writes only with its transaction: a rolled-back effect leaves no message', async () => {
    const table = unique('outbox').replace('-', '_');
    for (const statement of outboxSchema(table).statements) await db.$executeRawUnsafe(statement);
    cleanups.push(() => db.$executeRawUnsafe(`drop table ${table}`));
    const outbox = createOutbox(db, { table });
    await expect(
      db.$transaction(async (tx) => {
        await outbox.enqueue(tx, { type: 'order.ship', destination: 'orders', body: {} });
        throw new Error('the effect failed');
      }),
    ).rejects.toThrow('the effect failed');
    expect(await outbox.countUnsent()).toBe(0);
    // The same id twice: one row.
    await db.$transaction(async (tx) => {
      await outbox.enqueue(tx, { id: 'same', type: 'order.ship', destination: 'orders', body: {} });
      await outbox.enqueue(tx, { id: 'same', type: 'order.ship', destination: 'orders', body: {} });
    });
    expect(await outbox.countUnsent()).toBe(1);
  });
});
