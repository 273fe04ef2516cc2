/**
 * POST /api/webhooks/provider through the real route handler and the real database: signature checks, exactly
 * one effect per event id under concurrent redelivery, forward-only status, and the fulfilment job enqueued in
 * the same transaction. The dedupe has a control run: the same receiver and handler, given a naive event claim
 * that accepts every delivery (a dependency the test passes; the route itself has no switch).
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { markOrderRefunded } from '@idem/payments';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ownCopyOf } from './helpers/own-product.ts';

const SECRET = 'whsec_test_idem';
const databaseUrl = process.env.DATABASE_URL ?? '';
const db = createPrismaClient({ connectionString: databaseUrl, max: 4 });
const sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });
let POST: (request: Request) => Promise<Response>;
/** The route's receiver and handler on the same database and queue, with a claim that accepts every delivery. */
let POSTWithoutDedupe: (request: Request) => Promise<Response>;

beforeAll(async () => {
  await seedDatabase(db);
  ({ POST } = await import('~/app/api/webhooks/provider/route'));
  // The route starts its job queue on the first valid event; start it now so pgboss.job exists for the counts.
  const { enqueueFulfilmentIn, jobQueue } = await import('~/server/jobs');
  await jobQueue();
  const { handleProviderEvent } = await import('~/server/webhooks/handle-provider-event');
  const { receiveProviderWebhook } = await import('~/server/webhooks/receive-provider-webhook');
  POSTWithoutDedupe = (request) =>
    receiveProviderWebhook(request, {
      secret: SECRET,
      apply: (payload) =>
        handleProviderEvent(
          {
            db,
            enqueueFulfilment: enqueueFulfilmentIn,
            claimEvent: async () => true,
          },
          payload,
        ),
    });
});
afterAll(async () => {
  await db.$disconnect();
  await sql.end();
});

async function pendingOrder(sku = 'NB-DOT-A5', quantity = 1) {
  const product = await db.product.findUniqueOrThrow({ where: { sku } });
  await db.product.update({ where: { id: product.id }, data: { stock: { decrement: quantity } } });
  return db.order.create({
    data: {
      principal: `guest:${randomUUID()}`,
      email: 'webhook@example.com',
      totalCents: product.priceCents * quantity,
      items: {
        create: [
          { productId: product.id, sku, name: product.name, quantity, unitPriceCents: product.priceCents },
        ],
      },
    },
  });
}

type EventType = 'charge.succeeded' | 'charge.failed' | 'charge.refunded';

/** A charge event for `orderId`; `amount` must be the order's total (1400: one Dotted Notebook). */
function event(
  type: EventType,
  orderId: string,
  id = `evt_${randomUUID().replaceAll('-', '')}`,
  amount = 1400,
) {
  return {
    id,
    object: 'event',
    type,
    created: Math.floor(Date.now() / 1000),
    data: {
      object: {
        id: `ch_${orderId.replaceAll('-', '').slice(0, 24)}`,
        object: 'charge',
        order: orderId,
        amount,
        currency: 'usd',
        status: type === 'charge.failed' ? 'failed' : 'succeeded',
        refunded: type === 'charge.refunded',
      },
    },
  };
}

function sign(body: string, { secret = SECRET, timestamp = Math.floor(Date.now() / 1000) } = {}) {
  const signature = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${signature}`;
}

function deliver(payload: unknown, signature?: string, receiver = POST) {
  const body = JSON.stringify(payload);
  return receiver(
    new Request('http://localhost/api/webhooks/provider', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idem-signature': signature ?? sign(body) },
      body,
    }),
  );
}

async function fulfilmentJobs(orderId: string): Promise<number> {
  const { rows } = await sql.query<{ count: string }>(
    `select count(*) from pgboss.job where name = 'fulfilment' and data->>'orderId' = $1`,
    [orderId],
  );
  return Number(rows[0]?.count ?? 0);
}

async function processed(eventId: string): Promise<number> {
  return db.processedEvent.count({ where: { id: eventId } });
}

describe('signature', () => {
  it('a bad signature is a 400 and stores nothing', async () => {
    const order = await pendingOrder();
    const payload = event('charge.succeeded', order.id);
    const response = await deliver(payload, sign(JSON.stringify(payload), { secret: 'whsec_wrong' }));
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      error: expect.stringContaining('signature does not match'),
    });
    expect(await processed(payload.id)).toBe(0);
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('pending');
    expect(await fulfilmentJobs(order.id)).toBe(0);
  });

  it('a stale timestamp (beyond 5 minutes) is a 400 and stores nothing', async () => {
    const order = await pendingOrder();
    const payload = event('charge.succeeded', order.id);
    const stale = Math.floor(Date.now() / 1000) - 301;
    const response = await deliver(payload, sign(JSON.stringify(payload), { timestamp: stale }));
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: expect.stringContaining('tolerance') });
    expect(await processed(payload.id)).toBe(0);
  });

  it('a missing header, or a body changed after signing, is a 400', async () => {
    const order = await pendingOrder();
    const payload = event('charge.succeeded', order.id);
    const missing = await POST(
      new Request('http://localhost/api/webhooks/provider', {
        method: 'POST',
        body: JSON.stringify(payload),
      }),
    );
    expect(missing.status).toBe(400);
    const tampered = await deliver({ ...payload, type: 'charge.refunded' }, sign(JSON.stringify(payload)));
    expect(tampered.status).toBe(400);
    expect(await processed(payload.id)).toBe(0);
  });
});

describe('at-least-once delivery, exactly-once effect', () => {
  it('the same charge.succeeded delivered 5 times concurrently → one status change, one fulfilment job', async () => {
    const order = await pendingOrder();
    const payload = event('charge.succeeded', order.id);
    const responses = await Promise.all(Array.from({ length: 5 }, () => deliver(payload)));
    const bodies = (await Promise.all(responses.map((response) => response.json()))) as Array<{
      duplicate: boolean;
    }>;
    expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 200, 200]);
    expect(bodies.filter((body) => !body.duplicate)).toHaveLength(1);
    expect(await processed(payload.id)).toBe(1);
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('paid');
    expect(await db.payment.count({ where: { orderId: order.id } })).toBe(1);
    expect(await fulfilmentJobs(order.id)).toBe(1);
    console.log(
      `[webhook dedupe ON] 5 concurrent deliveries → ${await fulfilmentJobs(order.id)} fulfilment job(s)`,
    );
  });

  /** Deliveries of a charge that does not match its order, whose effect is a count and a warning, not a transition. */
  async function anomalyWarnings(post?: (request: Request) => Promise<Response>): Promise<number> {
    const { logger } = await import('~/server/observability/log');
    const warn = vi.spyOn(logger, 'warn').mockImplementation(() => {});
    try {
      const order = await pendingOrder();
      const payload = event('charge.succeeded', order.id, undefined, order.totalCents + 1);
      for (let delivery = 0; delivery < 5; delivery += 1)
        expect((await deliver(payload, undefined, post)).status).toBe(200);
      return warn.mock.calls.filter(([fields]) => (fields as { order_id?: string }).order_id === order.id)
        .length;
    } finally {
      warn.mockRestore();
    }
  }

  it('a mismatching charge delivered 5 times is counted and logged once', async () => {
    expect(await anomalyWarnings()).toBe(1);
  });

  it('control: with a claim that accepts every delivery, each delivery applies its effect again (the transition itself stays single)', async () => {
    const warnings = await anomalyWarnings(POSTWithoutDedupe);
    console.log(`[webhook dedupe OFF] 5 deliveries of a mismatching charge → ${warnings} anomaly warning(s)`);
    expect(warnings).toBe(5);
    // pending → paid is a guarded transition that writes its job: without the claim too, one job.
    const order = await pendingOrder();
    const payload = event('charge.succeeded', order.id);
    for (let delivery = 0; delivery < 5; delivery += 1)
      expect((await deliver(payload, undefined, POSTWithoutDedupe)).status).toBe(200);
    expect(await fulfilmentJobs(order.id)).toBe(1);
  });

  it('charge.failed delivered twice gives the stock back once', async () => {
    // A product only this test orders: test files run in parallel, and another's order would move the stock.
    const sku = await ownCopyOf(db, 'MUG-STONE');
    const before = (await db.product.findUniqueOrThrow({ where: { sku } })).stock;
    const order = await pendingOrder(sku, 2);
    const payload = event('charge.failed', order.id, undefined, order.totalCents);
    await Promise.all([deliver(payload), deliver(payload)]);
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('payment_failed');
    expect((await db.product.findUniqueOrThrow({ where: { sku } })).stock).toBe(before);
  });
});

describe('order of events', () => {
  it('refunded before succeeded (out of order) → refunded stays, nothing ships', async () => {
    const order = await pendingOrder();
    await db.order.update({ where: { id: order.id }, data: { status: 'paid' } });
    expect((await deliver(event('charge.refunded', order.id))).status).toBe(200);
    const late = await deliver(event('charge.succeeded', order.id));
    expect(await late.json()).toMatchObject({ duplicate: false, effect: 'no_change' });
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('refunded');
    expect(await fulfilmentJobs(order.id)).toBe(0);
  });

  it('refunded before succeeded on a PENDING order (issue 27, item 5): refunded, stock back, the late success pays nothing and ships nothing', async () => {
    const sku = await ownCopyOf(db, 'MUG-STONE');
    const before = (await db.product.findUniqueOrThrow({ where: { sku } })).stock;
    const order = await pendingOrder(sku, 1);
    const refunded = await deliver(event('charge.refunded', order.id, undefined, order.totalCents));
    expect(await refunded.json()).toMatchObject({ duplicate: false, effect: 'refunded' });
    const late = await deliver(event('charge.succeeded', order.id, undefined, order.totalCents));
    expect(await late.json()).toMatchObject({ duplicate: false, effect: 'no_change' });
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('refunded');
    expect(await fulfilmentJobs(order.id)).toBe(0);
    expect((await db.product.findUniqueOrThrow({ where: { sku } })).stock).toBe(before);
  });

  it('CONTROL (the refund handled as before: only paid or shipped orders move): the pending order stays pending and the late success ships a refunded payment', async () => {
    const order = await pendingOrder();
    await db.$transaction((tx) => markOrderRefunded(tx, order.id)); // what charge.refunded did for a pending order
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('pending');
    const late = await deliver(event('charge.succeeded', order.id));
    expect(await late.json()).toMatchObject({ duplicate: false, effect: 'fulfilment_queued' });
    expect(await fulfilmentJobs(order.id)).toBe(1);
  });

  it('succeeded then refunded → paid, then refunded', async () => {
    const order = await pendingOrder();
    expect(await (await deliver(event('charge.succeeded', order.id))).json()).toMatchObject({
      effect: 'fulfilment_queued',
    });
    expect(await (await deliver(event('charge.refunded', order.id))).json()).toMatchObject({
      effect: 'refunded',
    });
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('refunded');
  });

  it('an event for an unknown order is acknowledged and ignored', async () => {
    const response = await deliver(event('charge.succeeded', randomUUID()));
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ duplicate: false, effect: 'ignored' });
  });
});
