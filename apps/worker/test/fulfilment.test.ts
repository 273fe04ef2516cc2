/**
 * The fulfilment handler, called directly (simulated redelivery) and through the queue with an in-process
 * worker: one shipment, one receipt, status shipped, however many deliveries; nothing for an unpaid order.
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient, type Database, OrderStatus } from '@idem/db';
import { enqueueFulfilment, type PgBoss, Queue, startJobQueue } from '@idem/jobs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CARRIER, fulfilOrder, type RunningWorker, startWorker } from '../src/index.ts';
import { installFaultTriggers } from './fault-triggers.ts';
import {
  collectingLogger,
  createOrder,
  createTestDb,
  databaseUrl,
  dropSchema,
  effectsOf,
  jobsOf,
  uniqueName,
  waitFor,
} from './helpers.ts';

let db: Database;
const log = collectingLogger();

beforeAll(() => {
  db = createTestDb();
});
afterAll(async () => {
  await db.$disconnect();
});

describe('fulfilOrder (the handler, called directly)', () => {
  it('twice for the same paid order → one shipment, one receipt, status shipped', async () => {
    const order = await createOrder(db, 'paid');

    const first = await fulfilOrder(db, order.id, { log });
    expect(first).toMatchObject({ found: 'paid', shipmentCreated: true, receiptCreated: true });
    const second = await fulfilOrder(db, order.id, { log });
    expect(second).toMatchObject({ found: 'shipped', shipmentCreated: false, receiptCreated: false });

    const effects = await effectsOf(db, order.id);
    expect(effects.status).toBe('shipped');
    expect(effects.shipments).toBe(1);
    expect(effects.receipts.map((r) => r.kind)).toEqual(['receipt']);
  });

  it('five deliveries at once → still one shipment and one receipt', async () => {
    const order = await createOrder(db, 'paid');
    const results = await Promise.all(Array.from({ length: 5 }, () => fulfilOrder(db, order.id, { log })));

    expect(results.filter((r) => r.shipmentCreated)).toHaveLength(1);
    expect(results.filter((r) => r.receiptCreated)).toHaveLength(1);
    const effects = await effectsOf(db, order.id);
    expect(effects).toMatchObject({ status: 'shipped', shipments: 1 });
    expect(effects.receipts).toHaveLength(1);
  });

  it('the receipt goes to the order email, with the total and the items', async () => {
    const order = await createOrder(db, 'paid');
    await fulfilOrder(db, order.id, { log });
    const [receipt] = (await effectsOf(db, order.id)).receipts;

    expect(receipt?.recipient).toBe(order.email);
    expect(receipt?.subject).toContain('$29.99');
    expect(receipt?.body).toContain('2 × Worker test mug');
    expect(receipt?.body).toContain('at $12.50 = $25.00');
    expect(receipt?.body).toContain('1 × Worker test tea');
    expect(receipt?.body).toContain('Total: $29.99');
    expect(receipt?.body).toContain(CARRIER);
  });

  it.each([OrderStatus.pending, OrderStatus.payment_failed, OrderStatus.refunded])(
    'an order that is %s → nothing: no shipment, no receipt, status unchanged',
    async (status) => {
      const order = await createOrder(db, status);
      const result = await fulfilOrder(db, order.id, { log });

      expect(result).toMatchObject({ found: status, shipmentCreated: false, receiptCreated: false });
      expect(result.note).toContain(`nothing to do: order ${status}`);
      expect(await effectsOf(db, order.id)).toEqual({ status, shipments: 0, receipts: [] });
    },
  );

  it('an unknown order → nothing (the job completes)', async () => {
    const result = await fulfilOrder(db, randomUUID(), { log });
    expect(result).toMatchObject({ found: 'missing', shipmentCreated: false, receiptCreated: false });
  });

  it('crash after the shipment, before the receipt: the redelivery writes the receipt, not a second shipment', async () => {
    const order = await createOrder(db, 'paid');
    // The state tx 1 leaves behind when the process dies right after it commits.
    await db.$transaction([
      db.order.update({ where: { id: order.id }, data: { status: 'shipped' } }),
      db.shipment.create({ data: { orderId: order.id, carrier: CARRIER } }),
    ]);

    const redelivery = await fulfilOrder(db, order.id, { log });
    expect(redelivery).toMatchObject({ found: 'shipped', shipmentCreated: false, receiptCreated: true });
    const effects = await effectsOf(db, order.id);
    expect(effects).toMatchObject({ status: 'shipped', shipments: 1 });
    expect(effects.receipts).toHaveLength(1);
  });

  it('CONTROL (a receipt kind per transaction, from the database): a redelivery writes a second receipt', async () => {
    const faults = await installFaultTriggers(db);
    const session = await faults.session(databaseUrl, { receiptKindPerDelivery: true });
    const control = createPrismaClient({ connectionString: session.url, max: 1 });
    try {
      const order = await createOrder(db, 'paid');
      await fulfilOrder(control, order.id, { log });
      await fulfilOrder(control, order.id, { log });

      const effects = await effectsOf(db, order.id);
      expect(effects.shipments).toBe(1); // the shipment's unique order_id is untouched by the trigger
      const kinds = effects.receipts.map((r) => r.kind);
      expect(kinds).toHaveLength(2);
      expect(new Set(kinds).size).toBe(2);
      for (const kind of kinds) expect(kind).toMatch(/^receipt:tx\d+$/);
    } finally {
      await control.$disconnect();
      await faults.drop();
    }
  });
});

describe('through the queue (in-process worker, private pg-boss schema)', () => {
  const schema = uniqueName('pgboss_wf');
  let worker: RunningWorker;
  let sender: PgBoss;

  beforeAll(async () => {
    worker = await startWorker({
      databaseUrl,
      db,
      schema,
      pollingIntervalSeconds: 0.5,
      fulfilmentConcurrency: 2,
      cleanupCron: null,
      log,
    });
    sender = await startJobQueue(databaseUrl, { role: 'sender', schema, onError: log.error });
  });
  afterAll(async () => {
    await sender?.stop({ graceful: false });
    await worker?.stop({ graceSeconds: 1 });
    await dropSchema(db, schema);
  });

  const completedJobs = (orderId: string, count: number) =>
    waitFor(`${count} completed fulfilment job(s) for ${orderId}`, async () => {
      const jobs = await jobsOf(db, schema, orderId);
      return jobs.filter((job) => job.state === 'completed').length >= count && jobs;
    });

  it('the job sent twice at once, run by two loops → two jobs complete, one shipment, one receipt', async () => {
    const order = await createOrder(db, 'paid');
    const ids = await Promise.all([enqueueFulfilment(sender, order.id), enqueueFulfilment(sender, order.id)]);
    expect(new Set(ids).size).toBe(2);

    const jobs = await completedJobs(order.id, 2);
    const effects = await effectsOf(db, order.id);
    expect(effects).toMatchObject({ status: 'shipped', shipments: 1 });
    expect(effects.receipts).toHaveLength(1);
    // Both jobs ran to completion; exactly one of them did the work.
    const outputs = jobs.map((job) => job.output as { shipmentCreated: boolean; receiptCreated: boolean });
    expect(outputs.filter((o) => o.shipmentCreated)).toHaveLength(1);
    expect(outputs.filter((o) => o.receiptCreated)).toHaveLength(1);
  });

  it('a job sent again after the first completed → nothing more happens', async () => {
    const order = await createOrder(db, 'paid');
    await enqueueFulfilment(sender, order.id);
    await completedJobs(order.id, 1);
    expect(await enqueueFulfilment(sender, order.id)).toEqual(expect.any(String));
    await completedJobs(order.id, 2);

    const effects = await effectsOf(db, order.id);
    expect(effects).toMatchObject({ status: 'shipped', shipments: 1 });
    expect(effects.receipts).toHaveLength(1);
  });

  it('a job for a pending order completes and changes nothing', async () => {
    const order = await createOrder(db, 'pending');
    await enqueueFulfilment(sender, order.id);
    const [job] = await completedJobs(order.id, 1);

    expect(job?.retry_count).toBe(0);
    expect(await effectsOf(db, order.id)).toEqual({ status: 'pending', shipments: 0, receipts: [] });
  });

  it('a malformed payload is dropped (completed, not retried) with an error line', async () => {
    const marker = randomUUID();
    const id = await sender.send(Queue.fulfilment, { orderId: 'not-a-uuid', marker });
    const job = await waitFor('the malformed job to complete', async () => {
      const [row] = await sender.findJobs(Queue.fulfilment, { id: id ?? '' });
      return row?.state === 'completed' && row;
    });
    expect(job.retryCount).toBe(0);
    expect(log.lines.some((line) => line.includes(`fulfilment job ${id}: invalid payload`))).toBe(true);
  });
});
