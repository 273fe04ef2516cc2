/**
 * Issue 12, item 2 (second half) — provider outages, timeouts and "Start over" after an unknown outcome left
 * `pending` orders holding their stock forever. The reconciler (a worker job) settles every pending order whose
 * last charge attempt is old enough, from the provider's answer. Orders are aged in the database, not waited for.
 */
import type { PaymentProvider } from '@idem/payments';
import { beginChargeAttempt } from '@idem/payments';
import { type ReconcileDeps, reconcilePendingOrders } from '@idem/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { db } from '~/server/db';
import {
  ageKeysPastRetention,
  ageOrdersOf,
  aliceRequest,
  caught,
  productWithStock,
  quietLogger,
  type RunningProvider,
  reason,
  setKnobs,
  startCheckoutWorld,
  stockOf,
  succeededChargesFor,
} from './support/checkout.ts';

let provider: RunningProvider;
let client: PaymentProvider;

beforeAll(async () => {
  ({ provider, client } = await startCheckoutWorld());
});
afterAll(async () => {
  await provider?.close();
});

function reconcilerDeps(via: PaymentProvider = client) {
  const fulfilments: string[] = [];
  const deps: ReconcileDeps = {
    db,
    provider: via,
    enqueueFulfilment: async (orderId) => {
      fulfilments.push(orderId);
    },
    log: quietLogger,
  };
  return { deps, fulfilments };
}

const input = (sku: string) => ({
  items: [{ sku, quantity: 2 }],
  email: 'alice@example.com',
  cardToken: 'tok_visa',
});

/** A checkout that ends in 503 because the provider failed before charging: the order is left pending. */
async function checkoutDuringOutage() {
  const sku = await productWithStock(5);
  const key = crypto.randomUUID();
  await setKnobs(provider, { failNext: 1 });
  expect((await caught(aliceRequest(key, client).checkout.placeOrder(input(sku)))).code).toBe(
    'SERVICE_UNAVAILABLE',
  );
  const order = await db.order.findFirstOrThrow({ where: { items: { some: { sku } } } });
  expect(order.status).toBe('pending');
  return { sku, key, order };
}

const counter = async (label: string) =>
  Number(
    (
      await db.operationalCounter.findUnique({
        where: { name_label: { name: 'orders_reconciled', label } },
      })
    )?.value ?? 0,
  );

describe('pending orders after a provider outage', () => {
  it('CONTROL (no reconciler): ten minutes later the order is still pending and its stock still held', async () => {
    const { sku, order } = await checkoutDuringOutage();
    await ageOrdersOf(sku, 10);
    expect(await stockOf(sku)).toBe(3);
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('pending');
  });

  it('protected: the reconciler finds no charge, cancels the order, gives the stock back; a late retry replays that', async () => {
    const { sku, key, order } = await checkoutDuringOutage();
    await ageOrdersOf(sku, 10);
    const abandonedBefore = await counter('abandoned');

    const { deps } = reconcilerDeps();
    const summary = await reconcilePendingOrders(deps);
    expect(summary.settled.abandoned).toBeGreaterThanOrEqual(1);
    expect(await stockOf(sku)).toBe(5);
    const settled = await db.order.findUniqueOrThrow({ where: { id: order.id }, include: { payment: true } });
    expect([settled.status, settled.reconciledOutcome, settled.payment?.failureCode]).toEqual([
      'payment_failed',
      'abandoned',
      'abandoned',
    ]);
    expect(await counter('abandoned')).toBeGreaterThan(abandonedBefore);

    // Three days later the same key comes back: it resumes the cancelled order and gets a decided answer.
    await ageKeysPastRetention(key, sku);
    const late = await caught(aliceRequest(key, client).checkout.placeOrder(input(sku)));
    expect([late.code, reason(late)]).toEqual(['PAYMENT_REQUIRED', 'payment_abandoned']);
    expect(await succeededChargesFor(client, sku)).toBe(0);
    expect(await stockOf(sku)).toBe(5);

    // Idempotent: a second run changes nothing.
    await reconcilePendingOrders(deps);
    expect(await stockOf(sku)).toBe(5);
  });
});

describe('a charge whose response was lost', () => {
  it('is found by the reconciler: the order is paid and fulfilled once, even with two runs at once', async () => {
    const sku = await productWithStock(5);
    await setKnobs(provider, { dropResponseNext: 1 });
    await caught(aliceRequest(crypto.randomUUID(), client).checkout.placeOrder(input(sku)));
    await ageOrdersOf(sku, 10);
    const order = await db.order.findFirstOrThrow({ where: { items: { some: { sku } } } });

    const { deps, fulfilments } = reconcilerDeps();
    await Promise.all([reconcilePendingOrders(deps), reconcilePendingOrders(deps)]);
    const paid = await db.order.findUniqueOrThrow({ where: { id: order.id }, include: { payment: true } });
    expect([paid.status, paid.reconciledOutcome, paid.payment?.status]).toEqual([
      'paid',
      'paid',
      'succeeded',
    ]);
    expect(fulfilments.filter((id) => id === order.id)).toHaveLength(1);
    expect(await stockOf(sku)).toBe(3);
  });
});

describe('the reconciler never settles an order whose charge may still be running', () => {
  it('leaves alone an order with a fresh charge attempt', async () => {
    const { sku, order } = await checkoutDuringOutage();
    await ageOrdersOf(sku, 10);
    await beginChargeAttempt(db, order.id); // a retry starts charging it right now
    await reconcilePendingOrders(reconcilerDeps().deps);
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('pending');
  });

  it('re-checks under the row lock: an attempt that starts while it asks the provider wins', async () => {
    const { sku, order } = await checkoutDuringOutage();
    await ageOrdersOf(sku, 10);
    // The provider is asked, and meanwhile a retry stamps a new attempt (and would charge).
    const racing: PaymentProvider = {
      charge: (request) => client.charge(request),
      async listCharges(orderId) {
        const charges = await client.listCharges(orderId);
        if (orderId === order.id) await beginChargeAttempt(db, orderId);
        return charges;
      },
    };
    const summary = await reconcilePendingOrders(reconcilerDeps(racing).deps);
    expect(summary.skipped).toBeGreaterThanOrEqual(1);
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('pending');
    expect(await stockOf(sku)).toBe(3);
  });
});
