/**
 * The worker's fulfilment on a real broker (QUEUE_URL): RabbitMQ on 127.0.0.1:5672 and NATS JetStream on
 * 127.0.0.1:4222, each under a namespace of its own. A paid order's message goes into the outbox in the paying
 * transaction; the worker's relay publishes it, its consumer ships the order once — the message id claimed in
 * the same transaction as the shipment and the receipt. The broker-level faults (a consumer killed before its
 * ack, a relay killed before its mark, three consumers, a poison message) are tested with controls in
 * packages/idempotency/test/consumer-*.test.ts; here: the checkout's wiring of them.
 */
import { brokerNames, type FulfilmentOutbox, fulfilmentOutbox } from '@idem/broker';
import type { Database } from '@idem/db';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningWorker, startWorker } from '../src/index.ts';
import {
  collectingLogger,
  createOrder,
  createTestDb,
  databaseUrl,
  dropSchema,
  effectsOf,
  uniqueName,
  waitFor,
} from './helpers.ts';

/** What a republished message meets: RabbitMQ delivers it again; JetStream drops it within its duplicate window. */
const BROKERS = [
  { kind: 'rabbitmq', url: 'amqp://guest:guest@127.0.0.1:5672', republished: 'delivered again' },
  { kind: 'nats', url: 'nats://127.0.0.1:4222', republished: 'dropped by the stream (Nats-Msg-Id)' },
] as const;

let db: Database;
beforeAll(() => {
  db = createTestDb();
});
afterAll(async () => {
  await db.$disconnect();
});

async function sentAt(messageId: string): Promise<Date | null | undefined> {
  const [row] = await db.$queryRaw<Array<{ sent_at: Date | null }>>`
    select sent_at from idempotency_outbox where id = ${messageId}`;
  return row?.sent_at;
}

async function inboxStateOf(messageId: string): Promise<string | undefined> {
  const [row] = await db.$queryRaw<Array<{ state: string }>>`
    select state from idempotency_keys where scope = 'worker' and procedure = 'fulfilment' and key = ${messageId}`;
  return row?.state;
}

/** How many messages with this Nats-Msg-Id the namespace's stream holds (JetStream keeps one per id in the window). */
async function streamMessagesOf(namespace: string, messageId: string): Promise<number> {
  const connection = await connect({ servers: '127.0.0.1:4222' });
  try {
    const consumer = await jetstream(connection).consumers.get(brokerNames(namespace).stream);
    let count = 0;
    for (;;) {
      const message = await consumer.next({ expires: 1_000 });
      if (!message) return count;
      if (message.headers?.get('Nats-Msg-Id') === messageId) count += 1;
    }
  } finally {
    await connection.close();
  }
}

describe.each(BROKERS)('fulfilment on $kind (QUEUE_URL)', ({ kind, url, republished }) => {
  const log = collectingLogger();
  const schema = uniqueName('pgboss_broker');
  const namespace = uniqueName('t').replace(/_/g, '-');
  let messages: FulfilmentOutbox;
  let worker: RunningWorker;

  beforeAll(async () => {
    messages = fulfilmentOutbox(db);
    worker = await startWorker({
      databaseUrl,
      db,
      schema,
      queue: { url, namespace, retryDelayMs: 50 },
      pollingIntervalSeconds: 0.5,
      fulfilmentConcurrency: 2,
      cleanupCron: null,
      log,
    });
  });
  afterAll(async () => {
    await worker?.stop({ graceSeconds: 2 });
    await dropSchema(db, schema);
  });

  it('takes no fulfilment jobs from pg-boss: the broker carries them', () => {
    expect(worker.queues).not.toContain('fulfilment');
    expect(worker.broker).toBeDefined();
  });

  it('a paid order, its message written in the paying transaction → published, consumed, shipped once with one receipt', async () => {
    const order = await createOrder(db, 'pending');
    const messageId = await db.$transaction(async (tx) => {
      await tx.order.update({ where: { id: order.id }, data: { status: 'paid' } });
      return messages.enqueue(order.id, tx);
    });

    await waitFor('the order shipped with its receipt', async () => {
      const effects = await effectsOf(db, order.id);
      return effects.status === 'shipped' && effects.receipts.length === 1;
    });
    await waitFor('the message marked sent', async () => (await sentAt(messageId)) ?? false);
    await waitFor('the inbox row', async () => (await inboxStateOf(messageId)) === 'completed');
    const effects = await effectsOf(db, order.id);
    expect(effects.shipments).toBe(1);
    expect(effects.receipts[0]?.recipient).toBe(order.email);
    // The admin trail's view of it: written, published, consumed.
    expect(await messages.hops(order.id)).toEqual([
      {
        id: messageId,
        enqueuedAt: expect.any(Date),
        publishedAt: expect.any(Date),
        consumedAt: expect.any(Date),
        traceparent: null,
      },
    ]);
    expect(log.lines.filter((line) => line.startsWith(`fulfilment ${order.id}:`))).toEqual([
      `fulfilment ${order.id}: shipped; receipt written`,
    ]);
  });

  it('a rolled-back paying transaction leaves no message: nothing is published, nothing ships', async () => {
    const order = await createOrder(db, 'pending');
    let messageId = '';
    await expect(
      db.$transaction(async (tx) => {
        await tx.order.update({ where: { id: order.id }, data: { status: 'paid' } });
        messageId = await messages.enqueue(order.id, tx);
        throw new Error('the payment step failed after the enqueue');
      }),
    ).rejects.toThrow('the payment step failed');
    expect(messageId).not.toBe('');
    expect(await sentAt(messageId)).toBeUndefined();
    expect((await effectsOf(db, order.id)).status).toBe('pending');
  });

  it(`the same message published again (the relay died before its mark) → ${republished}; the handler does not run again`, async () => {
    const order = await createOrder(db, 'pending');
    const messageId = await db.$transaction(async (tx) => {
      await tx.order.update({ where: { id: order.id }, data: { status: 'paid' } });
      return messages.enqueue(order.id, tx);
    });
    await waitFor('the first delivery consumed', async () => (await inboxStateOf(messageId)) === 'completed');

    // What a relay that died between the broker's confirm and its mark leaves behind: the row unsent again.
    await db.$executeRaw`update idempotency_outbox set sent_at = null where id = ${messageId}`;
    await waitFor('published again', async () => (await sentAt(messageId)) ?? false);
    const duplicateLine = `fulfilment message ${messageId}: a duplicate, acknowledged`;
    if (kind === 'rabbitmq')
      await waitFor('the duplicate acknowledged', async () => log.lines.includes(duplicateLine));
    else expect(await streamMessagesOf(namespace, messageId)).toBe(1);
    // The fulfilment ran once: one line of its own, no "already shipped" second run.
    expect(log.lines.filter((line) => line.startsWith(`fulfilment ${order.id}:`))).toHaveLength(1);
    const effects = await effectsOf(db, order.id);
    expect(effects).toMatchObject({ status: 'shipped', shipments: 1 });
    expect(effects.receipts).toHaveLength(1);
  });

  it('a message whose body is not a fulfilment (no order id) is dead-lettered at once, with nothing done', async () => {
    const outbox = worker.broker?.messages.outbox;
    if (!outbox) throw new Error('the worker has no broker');
    const messageId = await db.$transaction((tx) =>
      outbox.enqueue(tx, {
        type: 'fulfilment',
        destination: 'fulfilment',
        body: { orderId: 'not-an-order' },
      }),
    );
    await waitFor('the dead-letter log line', async () =>
      log.lines.some((line) => line.includes(`fulfilment message ${messageId}: dead-lettered (invalid)`)),
    );
    expect(await inboxStateOf(messageId)).toBeUndefined();
  });

  it('the stranded-paid sweep sees the message as on its way (active) once published, created before', async () => {
    const order = await createOrder(db, 'shipped');
    const outbox = worker.broker?.messages.outbox;
    if (!outbox) throw new Error('the worker has no broker');
    // A row with another destination: no consumer takes it, so its states are the relay's alone.
    const states = worker.broker?.fulfilmentJobStates;
    const messageId = await db.$transaction((tx) =>
      outbox.enqueue(tx, {
        type: 'fulfilment',
        destination: `parked-${namespace}`,
        body: { orderId: order.id },
      }),
    );
    expect(await states?.(order.id)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^(created|active)$/)]),
    );
    await waitFor('published', async () => (await sentAt(messageId)) ?? false);
    expect(await states?.(order.id)).toEqual(['active']);
    await db.$executeRaw`update idempotency_outbox set sent_at = now() - interval '11 minutes' where id = ${messageId}`;
    expect(await states?.(order.id)).toEqual(['expired']);
  });
});
