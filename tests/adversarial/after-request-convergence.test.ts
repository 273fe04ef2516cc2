/**
 * Red team of the order's life after the request (issue 27): a paid order must ship and a stray charge must be
 * refunded even when the message that should have said so never comes.
 *   1. The checkout request settles an order `paid` (the provider answered the charge) and queues nothing: the
 *      provider's `charge.succeeded` webhook queues fulfilment. When the provider gives that webhook up, the
 *      customer is charged and nothing ever ships. A fulfilment job that runs out of retries ends the same way.
 *   2. A charge that lands on an order the reconciler gave up is refunded by its late-charge sweep, which looked
 *      only at the 100 most recently given-up orders: after an outage, an older one fell out for good.
 *   3. Each transition's follow-up is written in its own transaction (an outbox): the request's pending → paid
 *      now writes the fulfilment job beside it, so (1) is left to orders paid before, or whose job was lost.
 * A database of this file's own (the sweeps are about every order there is), a real provider, a real pg-boss.
 */
import {
  enqueueFulfilment,
  findFulfilmentJobs,
  type PgBoss,
  prismaTransactionDb,
  Queue,
  startJobQueue,
} from '@idem/jobs';
import {
  createProviderClient,
  markOrderPaid,
  markOrderPaymentFailed,
  type RefundingPaymentProvider,
  recordPayment,
} from '@idem/payments';
import { startProvider } from '@idem/provider';
import {
  auditOrders,
  fulfilOrder,
  type Logger,
  reconcilePendingOrders,
  refundLateCharges,
  runReconcile,
} from '@idem/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PlaceOrderDeps, placeOrder } from '~/server/services/place-order';
import { handleProviderEvent } from '~/server/webhooks/handle-provider-event';
import { createPrivateDatabase, type PrivateDatabase } from '../../apps/web/test/helpers/private-database.ts';

const quiet: Logger = { info: () => {}, error: () => {} };

let database: PrivateDatabase;
let provider: Awaited<ReturnType<typeof startProvider>>;
let client: RefundingPaymentProvider;
let boss: PgBoss;

beforeAll(async () => {
  database = await createPrivateDatabase('idem_convergence');
  provider = await startProvider({ databaseUrl: database.url, port: 0, testKnobs: true });
  client = createProviderClient({ baseUrl: provider.url, secretKey: 'sk_test_idem', timeoutMs: 5_000 });
  boss = await startJobQueue(database.url, { role: 'sender', onError: () => {} });
}, 60_000);
afterAll(async () => {
  await boss?.stop({ graceful: false });
  await provider?.close();
  await database?.drop();
});

/** The worker's reconciler deps, with this file's provider and pg-boss. */
const deps = () => ({
  db: database.db,
  provider: client,
  log: quiet,
  enqueueFulfilment: async (orderId: string) => {
    await boss.send(Queue.fulfilment, { orderId });
  },
  fulfilmentJobStates: async (orderId: string) =>
    (await findFulfilmentJobs(boss, orderId)).map((job) => job.state),
});

async function product() {
  const sku = `CONV-${crypto.randomUUID().slice(0, 8)}`;
  await database.db.product.create({
    data: { sku, name: `Lamp ${sku}`, description: 'convergence test', priceCents: 4_500, stock: 1_000 },
  });
  return sku;
}

/** A pending order of 1 × a 45.00 lamp, its stock taken. */
async function pendingOrder(sku: string) {
  const { db } = database;
  const item = await db.product.update({ where: { sku }, data: { stock: { decrement: 1 } } });
  return db.order.create({
    data: {
      principal: 'user:convergence-test',
      email: 'alice@example.com',
      currency: item.currency,
      totalCents: item.priceCents,
      items: {
        create: [{ productId: item.id, sku, name: item.name, quantity: 1, unitPriceCents: item.priceCents }],
      },
    },
  });
}

/** A real charge of the order at the provider, under the checkout's key for it. */
async function chargeAtProvider(order: { id: string; totalCents: number; currency: string }) {
  const answer = await client.charge({
    amountCents: order.totalCents,
    currency: order.currency,
    source: 'tok_visa',
    orderId: order.id,
    idempotencyKey: `order_${order.id}`,
  });
  if (answer.outcome !== 'succeeded') throw new Error(`charge: ${answer.outcome}`);
  return answer.charge;
}

/**
 * What the checkout request does when the provider answers its charge (settlePaid: the payment and
 * pending → paid in one transaction, nothing queued), `minutesAgo` ago; the webhook never comes.
 */
async function paidByTheRequest(minutesAgo: number) {
  const order = await pendingOrder(await product());
  const charge = await chargeAtProvider(order);
  await database.db.$transaction(async (tx) => {
    await recordPayment(tx, {
      orderId: order.id,
      providerChargeId: charge.id,
      status: 'succeeded',
      amountCents: charge.amount,
      currency: charge.currency,
    });
    expect(await markOrderPaid(tx, order.id)).toBe(true);
  });
  await database.db.$executeRaw`
    update payments set created_at = now() - make_interval(mins => ${minutesAgo}) where order_id = ${order.id}::uuid`;
  return order.id;
}

const statusOf = async (orderId: string) =>
  (await database.db.order.findUniqueOrThrow({ where: { id: orderId } })).status;
const jobStates = async (orderId: string) =>
  (await findFulfilmentJobs(boss, orderId)).map((job) => job.state);

describe('a paid order whose webhook never comes', () => {
  it('CONTROL (settling pending orders and refunding late charges, as the reconciler did): it stays paid, unshipped, with no job, for good', async () => {
    const orderId = await paidByTheRequest(10);
    for (let run = 0; run < 2; run += 1) {
      await reconcilePendingOrders(deps());
      await refundLateCharges(deps());
    }
    expect(await statusOf(orderId)).toBe('paid');
    expect(await jobStates(orderId)).toEqual([]);
  });

  it('protected: the reconciler run queues its fulfilment once (twice run, one job), and the job ships it', async () => {
    const orderId = await paidByTheRequest(10);
    const first = await runReconcile(deps());
    expect(first.strandedPaid.requeued).toBeGreaterThanOrEqual(1);
    expect(await jobStates(orderId)).toEqual(['created']);
    await runReconcile(deps());
    expect(await jobStates(orderId)).toEqual(['created']); // a live job: nothing more queued

    const shipped = await fulfilOrder(database.db, orderId, { log: quiet });
    expect(shipped).toMatchObject({ found: 'paid', shipmentCreated: true, receiptCreated: true });
    expect(await statusOf(orderId)).toBe('shipped');
    const counter = await database.db.operationalCounter.findUnique({
      where: { name_label: { name: 'stranded_paid_requeued', label: '' } },
    });
    expect(Number(counter?.value ?? 0)).toBeGreaterThanOrEqual(1);
  });

  it('protected: a paid order paid only a minute ago is left to its webhook (no job queued yet)', async () => {
    const orderId = await paidByTheRequest(1);
    await runReconcile(deps());
    expect(await jobStates(orderId)).toEqual([]);
  });

  it('protected: a fulfilment job that ran out of retries is replaced by a new one', async () => {
    const orderId = await paidByTheRequest(10);
    const jobId = await boss.send(Queue.fulfilment, { orderId });
    // Its retries exhausted (as pg-boss leaves it after the last failed delivery).
    await database.db.$executeRawUnsafe(
      `update pgboss.job set state = 'failed', completed_on = now() where id = $1::uuid`,
      jobId,
    );
    expect(await jobStates(orderId)).toEqual(['failed']);
    await runReconcile(deps());
    expect((await jobStates(orderId)).sort()).toEqual(['created', 'failed']);
  });

  it('protected: a paid order with a live job (its webhook came) is left alone', async () => {
    const orderId = await paidByTheRequest(10);
    await boss.send(Queue.fulfilment, { orderId });
    await runReconcile(deps());
    expect(await jobStates(orderId)).toEqual(['created']);
  });
});

describe('the checkout request that pays an order writes its fulfilment job in the same transaction', () => {
  /** The job insert of the app (`enqueueFulfilmentIn`), on this file's database and pg-boss. */
  const writeJob: PlaceOrderDeps['enqueueFulfilment'] = async (orderId, tx) => {
    await enqueueFulfilment(boss, orderId, prismaTransactionDb(tx));
  };
  const checkoutDeps = (enqueue: PlaceOrderDeps['enqueueFulfilment']): PlaceOrderDeps => ({
    db: database.db,
    provider: client,
    newOrderLimit: { max: 1_000, maxPerClient: 1_000, maxPending: 1_000, windowSeconds: 600 },
    enqueueFulfilment: enqueue,
  });
  const checkoutOf = async (sku: string) => ({
    principalId: 'user:convergence-test',
    orderId: crypto.randomUUID(),
    clientRef: null,
    input: { items: [{ sku, quantity: 1 }], email: 'alice@example.com', cardToken: 'tok_visa' },
  });
  const chargesAtProvider = async (orderId: string) =>
    (await client.listCharges(orderId)).filter((charge) => charge.status === 'succeeded').length;

  it('protected: the answer finds the job written; the webhook that follows adds none; the job ships it', async () => {
    const request = await checkoutOf(await product());
    const placed = await placeOrder(checkoutDeps(writeJob), request);
    expect(placed.status).toBe('paid');
    expect(await jobStates(request.orderId)).toEqual(['created']);

    const [charge] = await client.listCharges(request.orderId);
    if (!charge) throw new Error('no charge at the provider');
    const webhook = await handleProviderEvent(
      { db: database.db, enqueueFulfilment: writeJob },
      {
        id: `evt_${crypto.randomUUID().replaceAll('-', '')}`,
        object: 'event',
        type: 'charge.succeeded',
        created: Math.floor(Date.now() / 1000),
        data: { object: charge },
      },
    );
    expect(webhook).toEqual({ duplicate: false, effect: 'no_change' });
    expect(await jobStates(request.orderId)).toEqual(['created']);
    expect(await fulfilOrder(database.db, request.orderId, { log: quiet })).toMatchObject({
      shipmentCreated: true,
    });
    expect(await statusOf(request.orderId)).toBe('shipped');
  });

  it('protected: a job write that fails takes the payment down with it; the retry pays the order once, with one job', async () => {
    const request = await checkoutOf(await product());
    // The job row is written, then the transaction fails before it commits (a lost connection, a crash).
    const failing: PlaceOrderDeps['enqueueFulfilment'] = async (orderId, tx) => {
      await writeJob(orderId, tx);
      throw new Error('injected: the transaction fails after the job insert');
    };
    await expect(placeOrder(checkoutDeps(failing), request)).rejects.toThrow('injected');
    expect(await statusOf(request.orderId)).toBe('pending');
    expect(await database.db.payment.count({ where: { orderId: request.orderId } })).toBe(0);
    expect(await jobStates(request.orderId)).toEqual([]);
    expect(await chargesAtProvider(request.orderId)).toBe(1); // the money moved: the order is not done

    const retried = await placeOrder(checkoutDeps(writeJob), request);
    expect(retried.status).toBe('paid');
    expect(await jobStates(request.orderId)).toEqual(['created']);
    expect(await chargesAtProvider(request.orderId)).toBe(1);
  });

  it('CONTROL (the paying transaction writes no job, as before: the follow-up is left to a webhook that never comes): the order is paid with no job', async () => {
    const request = await checkoutOf(await product());
    const placed = await placeOrder(
      checkoutDeps(async () => {}),
      request,
    );
    expect(placed.status).toBe('paid');
    expect(await statusOf(request.orderId)).toBe('paid');
    expect(await jobStates(request.orderId)).toEqual([]);
  });
});

describe('a late charge behind more than a batch of newer cancellations', () => {
  /** An order the reconciler gave up `minutesAgo` ago (stock back, payment_failed / abandoned). */
  async function givenUp(sku: string, minutesAgo: number) {
    const order = await pendingOrder(sku);
    await database.db.$transaction(async (tx) => {
      await markOrderPaymentFailed(tx, order.id);
      await tx.$executeRaw`
        update orders set reconciled_outcome = 'abandoned',
                          reconciled_at = now() - make_interval(mins => ${minutesAgo})
         where id = ${order.id}::uuid`;
    });
    return order;
  }

  it('the charge on the oldest is refunded, whatever the number of newer ones (CONTROL: the 100 newest miss it)', async () => {
    const sku = await product();
    const oldest = await givenUp(sku, 50);
    const charge = await chargeAtProvider(oldest); // landed after it was given up
    // 150 newer cancellations, as after an outage.
    for (let index = 0; index < 150; index += 1) await givenUp(sku, 10);

    // CONTROL: the sweep as it was (the 100 most recently given up in the window) does not include it.
    const newest = await database.db.$queryRaw<Array<{ id: string }>>`
      select id::text from orders
       where status = 'payment_failed' and reconciled_outcome = 'abandoned'
         and reconciled_at > now() - interval '1 hour'
       order by reconciled_at desc limit 100`;
    expect(newest.map((row) => row.id)).not.toContain(oldest.id);

    const summary = await refundLateCharges(deps(), { batchSize: 100 });
    expect(summary.checked).toBeGreaterThanOrEqual(151);
    expect(summary.refunded).toBe(1);
    expect(await client.listCharges(oldest.id)).toEqual([
      expect.objectContaining({ id: charge.id, status: 'succeeded', refunded: true }),
    ]);
    // Run again: nothing more to refund.
    expect((await refundLateCharges(deps(), { batchSize: 100 })).refunded).toBe(0);
  }, 60_000);
});

describe('the invariant (pnpm idem:audit) over this database', () => {
  /** Runs every queued fulfilment job, as the worker would. */
  async function runFulfilmentJobs() {
    for (;;) {
      const jobs = await boss.fetch<{ orderId: string }>(Queue.fulfilment, { batchSize: 50 });
      if (jobs.length === 0) return;
      for (const job of jobs) {
        await fulfilOrder(database.db, job.data.orderId, { log: quiet });
        await boss.complete(Queue.fulfilment, job.id);
      }
    }
  }
  const audit = () => auditOrders({ db: database.db, provider: client }, { settleWithinSeconds: 300 });

  it('CONTROL: a stranded paid order and a kept late charge are violations; after the reconciler and the jobs, none is left', async () => {
    const stranded = await paidByTheRequest(10);
    const sku = await product();
    const cancelled = await pendingOrder(sku);
    await database.db.$transaction(async (tx) => {
      await markOrderPaymentFailed(tx, cancelled.id);
      await tx.$executeRaw`
        update orders set reconciled_outcome = 'abandoned', reconciled_at = now() - interval '20 minutes'
         where id = ${cancelled.id}::uuid`;
    });
    await chargeAtProvider(cancelled); // lands after it was given up

    const before = await audit();
    expect(before).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ orderId: stranded, kind: 'paid_not_shipped' }),
        expect.objectContaining({ orderId: cancelled.id, kind: 'cancelled_money_kept' }),
      ]),
    );

    await runReconcile(deps());
    await runFulfilmentJobs();
    expect(await audit()).toEqual([]);
    console.log(
      `[convergence] invariant: ${before.length} violation(s) before the reconciler run and the jobs (${[
        ...new Set(before.map((violation) => violation.kind)),
      ].join(', ')}), 0 after`,
    );
  }, 60_000);
});
