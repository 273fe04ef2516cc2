/**
 * Issue 12, item 3b: a signed `charge.succeeded` for 1 cent that names an unpaid order. Signed with the demo
 * secret (anyone can read it here) — or really charged with a leaked API key, which the provider then signs
 * itself — it used to make the order `paid` and queue its fulfilment. The receiver now compares the charge's
 * amount and currency with the order: a mismatch leaves the order untouched, is counted and logged, and is still
 * answered 2xx.
 *
 * Control: the same handler with a test-supplied comparison that accepts every charge (today's receiver).
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { enqueueFulfilment, prismaTransactionDb } from '@idem/jobs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

const DEMO_WEBHOOK_SECRET = 'whsec_test_idem';
const databaseUrl = process.env.DATABASE_URL ?? '';
const db = createPrismaClient({ connectionString: databaseUrl, max: 4 });
const sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });

type Route = typeof import('~/app/api/webhooks/provider/route');
let POST: Route['POST'];
let receive: typeof import('~/server/webhooks/receive-provider-webhook');
let handler: typeof import('~/server/webhooks/handle-provider-event');
let queue: Awaited<ReturnType<typeof import('~/server/jobs')['jobQueue']>>;

beforeAll(async () => {
  await seedDatabase(db);
  ({ POST } = await import('~/app/api/webhooks/provider/route'));
  receive = await import('~/server/webhooks/receive-provider-webhook');
  handler = await import('~/server/webhooks/handle-provider-event');
  queue = await (await import('~/server/jobs')).jobQueue();
});
afterAll(async () => {
  await db.$disconnect();
  await sql.end();
});

async function unpaidOrder(sku = 'LAMP-DESK', quantity = 1) {
  const product = await db.product.findUniqueOrThrow({ where: { sku } });
  await db.product.update({ where: { id: product.id }, data: { stock: { decrement: quantity } } });
  return db.order.create({
    data: {
      principal: `guest:${randomUUID()}`,
      email: 'victim@example.com',
      totalCents: product.priceCents * quantity,
      items: {
        create: [
          { productId: product.id, sku, name: product.name, quantity, unitPriceCents: product.priceCents },
        ],
      },
    },
  });
}

function chargeEvent(
  type: 'charge.succeeded' | 'charge.failed',
  orderId: string,
  amount: number,
  currency = 'usd',
) {
  return {
    id: `evt_${randomUUID().replaceAll('-', '')}`,
    object: 'event',
    type,
    created: Math.floor(Date.now() / 1000),
    data: {
      object: {
        id: `ch_${randomUUID().replaceAll('-', '').slice(0, 24)}`,
        object: 'charge',
        order: orderId,
        amount,
        currency,
        status: type === 'charge.failed' ? 'failed' : 'succeeded',
      },
    },
  };
}

function signedRequest(payload: unknown): Request {
  const body = JSON.stringify(payload);
  const timestamp = Math.floor(Date.now() / 1000);
  const v1 = createHmac('sha256', DEMO_WEBHOOK_SECRET).update(`${timestamp}.${body}`).digest('hex');
  return new Request('http://localhost/api/webhooks/provider', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idem-signature': `t=${timestamp},v1=${v1}` },
    body,
  });
}

/** The app's own handler and queue; `compareCharge` lets the control swap in today's "accept anything". */
function deliverThroughHandler(payload: unknown, compareCharge?: () => null) {
  return receive.receiveProviderWebhook(signedRequest(payload), {
    secret: DEMO_WEBHOOK_SECRET,
    apply: (event) =>
      handler.handleProviderEvent(
        {
          db,
          enqueueFulfilment: async (orderId, tx) => {
            await enqueueFulfilment(queue, orderId, prismaTransactionDb(tx));
          },
          ...(compareCharge ? { compareCharge } : {}),
        },
        event,
      ),
  });
}

async function fulfilmentJobs(orderId: string): Promise<number> {
  const { rows } = await sql.query<{ count: string }>(
    `select count(*) from pgboss.job where name = 'fulfilment' and data->>'orderId' = $1`,
    [orderId],
  );
  return Number(rows[0]?.count ?? 0);
}

async function anomalyCount(reason: string): Promise<number> {
  const row = await db.operationalCounter.findUnique({
    where: { name_label: { name: 'webhook_charge_anomalies', label: reason } },
  });
  return Number(row?.value ?? 0);
}

async function orderState(orderId: string) {
  const order = await db.order.findUniqueOrThrow({ where: { id: orderId } });
  return {
    status: order.status,
    payments: await db.payment.count({ where: { orderId } }),
    jobs: await fulfilmentJobs(orderId),
  };
}

describe('a signed charge.succeeded for 1 cent naming an unpaid order', () => {
  it('control: a receiver that does not compare the charge with the order ships it unpaid', async () => {
    const order = await unpaidOrder();
    const response = await deliverThroughHandler(chargeEvent('charge.succeeded', order.id, 1), () => null);
    expect(response.status).toBe(200);
    const state = await orderState(order.id);
    console.log(
      `[3b control] 1-cent charge for a ${order.totalCents}-cent order → ${state.status}, ${state.payments} payment, ${state.jobs} fulfilment job`,
    );
    expect(state).toEqual({ status: 'paid', payments: 1, jobs: 1 });
  });

  it('protected: order stays pending, no payment, no job; counted, logged, answered 200', async () => {
    const { logger } = await import('~/server/observability/log');
    const warn = vi.spyOn(logger, 'warn');
    const { metrics } = await import('~/server/observability/metrics');
    const { refreshDatabaseMetrics } = await import('~/server/observability/database-metrics');
    const before = await anomalyCount('amount_mismatch');
    try {
      const order = await unpaidOrder();
      const forged = chargeEvent('charge.succeeded', order.id, 1);
      const response = await POST(signedRequest(forged));
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ received: true, duplicate: false, effect: 'anomaly' });
      const state = await orderState(order.id);
      console.log(
        `[3b protected] 1-cent charge → ${state.status}, ${state.payments} payments, ${state.jobs} jobs`,
      );
      expect(state).toEqual({ status: 'pending', payments: 0, jobs: 0 });

      // A redelivery of the same event is a duplicate: counted once, still untouched.
      expect(await (await POST(signedRequest(forged))).json()).toMatchObject({ duplicate: true });
      expect(await anomalyCount('amount_mismatch')).toBe(before + 1);
      expect(warn).toHaveBeenCalledWith(
        expect.objectContaining({ order_id: order.id, reason: 'amount_mismatch', charge_amount: 1 }),
        expect.stringContaining('does not match'),
      );
      await refreshDatabaseMetrics(db, 0);
      const text = await metrics.registry.metrics();
      expect(text).toContain(`idem_webhook_charge_anomalies_total{reason="amount_mismatch"} ${before + 1}`);
      expect(text).toMatch(/idem_webhook_events_total\{type="charge.succeeded",result="anomaly"\} [1-9]/);

      // The genuine charge for the full amount still pays and ships it.
      const genuine = await POST(signedRequest(chargeEvent('charge.succeeded', order.id, order.totalCents)));
      expect(await genuine.json()).toMatchObject({ effect: 'fulfilment_queued' });
      expect(await orderState(order.id)).toEqual({ status: 'paid', payments: 1, jobs: 1 });
    } finally {
      warn.mockRestore();
    }
  });

  it('protected: the right amount in another currency is an anomaly too', async () => {
    const before = await anomalyCount('currency_mismatch');
    const order = await unpaidOrder();
    const response = await POST(
      signedRequest(chargeEvent('charge.succeeded', order.id, order.totalCents, 'jpy')),
    );
    expect(await response.json()).toMatchObject({ effect: 'anomaly' });
    expect(await orderState(order.id)).toEqual({ status: 'pending', payments: 0, jobs: 0 });
    expect(await anomalyCount('currency_mismatch')).toBe(before + 1);
  });

  it('protected: a second charge for a paid order is an anomaly, and its refund does not refund the order', async () => {
    const before = await anomalyCount('other_charge');
    const order = await unpaidOrder();
    const paid = chargeEvent('charge.succeeded', order.id, order.totalCents);
    expect(await (await POST(signedRequest(paid))).json()).toMatchObject({ effect: 'fulfilment_queued' });
    const second = chargeEvent('charge.succeeded', order.id, order.totalCents);
    expect(await (await POST(signedRequest(second))).json()).toMatchObject({ effect: 'anomaly' });
    const refundOfSecond = {
      ...second,
      id: `evt_${randomUUID().replaceAll('-', '')}`,
      type: 'charge.refunded',
    };
    expect(await (await POST(signedRequest(refundOfSecond))).json()).toMatchObject({ effect: 'anomaly' });
    expect(await orderState(order.id)).toEqual({ status: 'paid', payments: 1, jobs: 1 });
    expect(await anomalyCount('other_charge')).toBe(before + 2);
  });

  it('protected: a mismatched charge.failed neither fails the order nor gives its stock back', async () => {
    const stockBefore = (await db.product.findUniqueOrThrow({ where: { sku: 'LAMP-DESK' } })).stock;
    const order = await unpaidOrder();
    const response = await POST(signedRequest(chargeEvent('charge.failed', order.id, 1)));
    expect(await response.json()).toMatchObject({ effect: 'anomaly' });
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('pending');
    expect((await db.product.findUniqueOrThrow({ where: { sku: 'LAMP-DESK' } })).stock).toBe(stockBefore - 1);
  });
});

describe('a charge.succeeded for an order the reconciler already cancelled (money taken late)', () => {
  async function cancelledOrder() {
    const order = await unpaidOrder();
    // What the reconciler leaves behind when no charge reached the provider: a failed payment, stock back.
    await db.payment.create({
      data: {
        orderId: order.id,
        status: 'failed',
        amountCents: order.totalCents,
        currency: 'usd',
        failureCode: 'abandoned',
      },
    });
    await db.order.update({ where: { id: order.id }, data: { status: 'payment_failed' } });
    return order;
  }

  it('control: without the status rule the event passes silently (no_change), nothing counts it', async () => {
    const order = await cancelledOrder();
    const before = await anomalyCount('paid_after_cancel');
    const response = await deliverThroughHandler(
      chargeEvent('charge.succeeded', order.id, order.totalCents),
      () => null,
    );
    expect(await response.json()).toMatchObject({ effect: 'no_change' });
    expect(await anomalyCount('paid_after_cancel')).toBe(before);
  });

  it('protected: an anomaly, counted and logged; the order stays cancelled, nothing ships', async () => {
    const order = await cancelledOrder();
    const before = await anomalyCount('paid_after_cancel');
    const response = await POST(signedRequest(chargeEvent('charge.succeeded', order.id, order.totalCents)));
    expect(await response.json()).toMatchObject({ effect: 'anomaly' });
    expect(await orderState(order.id)).toEqual({ status: 'payment_failed', payments: 1, jobs: 0 });
    expect(await anomalyCount('paid_after_cancel')).toBe(before + 1);
  });
});
