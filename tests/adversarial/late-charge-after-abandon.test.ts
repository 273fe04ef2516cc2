/**
 * Red team of the money path — a charge that succeeds AFTER the reconciler gave its order up. The reconciler
 * cancels a pending order 5 minutes after its last charge attempt and gives the stock back; the customer is told
 * nothing was charged. Two ways a charge still lands on it afterwards:
 *   - a web process freezes (GC pause, suspended VM) between stamping its attempt and calling the provider,
 *     longer than the wait, then resumes and charges;
 *   - the provider finishes a charge request long after the client's timeout.
 * Without a second look the money stays with the shop for an order it cancelled: no refund, no signal.
 */
import {
  type PaymentProvider,
  ProviderUnavailableError,
  type RefundingPaymentProvider,
} from '@idem/payments';
import { reconcilePendingOrders, refundLateCharges } from '@idem/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { db } from '~/server/db';
import {
  ageOrdersOf,
  aliceCart,
  aliceRequest,
  caught,
  productWithStock,
  quietLogger,
  type RunningProvider,
  reason,
  setKnobs,
  startCheckoutWorld,
  stockOf,
} from './support/checkout.ts';

let provider: RunningProvider;
let client: RefundingPaymentProvider;

beforeAll(async () => {
  ({ provider, client } = await startCheckoutWorld());
});
afterAll(async () => {
  await provider?.close();
});

/** This file's orders: the reconciler runs here answer only for them (other files' orders stay theirs). */
const ours = new Set<string>();
const onlyOurs: RefundingPaymentProvider = {
  charge: (request) => client.charge(request),
  refund: (request) => client.refund(request),
  async listCharges(orderId) {
    if (!ours.has(orderId)) throw new ProviderUnavailableError('not an order of this test file');
    return client.listCharges(orderId);
  },
};
const reconcilerDeps = () => ({
  db,
  provider: onlyOurs,
  enqueueFulfilment: async () => {},
  log: quietLogger,
});

/**
 * The reconciler's run as far as this file is concerned: settle pending orders, then the late-charge sweep (its
 * third part, queuing fulfilment for stranded paid orders, has a private database of its own in
 * after-request-convergence.test.ts: here it would touch other files' orders).
 */
async function runReconcile(deps: ReturnType<typeof reconcilerDeps>) {
  const pending = await reconcilePendingOrders(deps);
  const lateCharges = await refundLateCharges(deps);
  return { pending, lateCharges };
}

/** A checkout left pending by a provider outage (503): 2 of the product's 5 units reserved. */
async function pendingOrder() {
  const sku = await productWithStock(5);
  const key = crypto.randomUUID();
  const input = aliceCart(sku, 2);
  await setKnobs(provider, { failNext: 1 });
  expect((await caught(aliceRequest(key, client).checkout.placeOrder(input))).code).toBe(
    'SERVICE_UNAVAILABLE',
  );
  const order = await db.order.findFirstOrThrow({ where: { items: { some: { sku } } } });
  ours.add(order.id);
  return { sku, key, input, orderId: order.id };
}

/**
 * The retry's process freezes right before its charge call for longer than the reconciler's wait (the order's
 * attempt is aged 10 minutes and the reconciler runs), then resumes and charges.
 */
function freezingBeforeTheCharge(real: PaymentProvider): PaymentProvider {
  return {
    listCharges: (orderId) => real.listCharges(orderId),
    async charge(request) {
      await db.$executeRaw`
        update orders set created_at = created_at - interval '10 minutes',
                          charge_attempted_at = charge_attempted_at - interval '10 minutes'
         where id = ${request.orderId}::uuid`;
      await reconcilePendingOrders(reconcilerDeps());
      return real.charge(request);
    },
  };
}

/** The retry that froze: the order is cancelled under it, and its charge lands anyway. */
async function chargedAfterGivenUp() {
  const { sku, key, input, orderId } = await pendingOrder();
  const answer = await caught(aliceRequest(key, freezingBeforeTheCharge(client)).checkout.placeOrder(input));
  // It answers with the order's decision, never a 200 for a cancelled order.
  expect([answer.code, reason(answer)]).toEqual(['PAYMENT_REQUIRED', 'payment_abandoned']);
  const order = await db.order.findUniqueOrThrow({ where: { id: orderId } });
  expect([order.status, order.reconciledOutcome]).toEqual(['payment_failed', 'abandoned']);
  expect(await stockOf(sku)).toBe(5);
  return { sku, orderId };
}

const keptCharges = async (orderId: string) =>
  (await client.listCharges(orderId)).filter((charge) => charge.status === 'succeeded' && !charge.refunded);

const refundedCounter = async () =>
  Number(
    (
      await db.operationalCounter.findUnique({
        where: { name_label: { name: 'late_charges_refunded', label: '' } },
      })
    )?.value ?? 0,
  );

describe('a charge that lands on an order the reconciler gave up', () => {
  it('CONTROL (the reconciler only settles pending orders, as before): the money is kept for a cancelled order', async () => {
    const { orderId } = await chargedAfterGivenUp();
    await reconcilePendingOrders(reconcilerDeps());
    await reconcilePendingOrders(reconcilerDeps());
    expect(await keptCharges(orderId)).toHaveLength(1);
  });

  it('protected: the next reconciler run refunds it, counts it, and a second run changes nothing', async () => {
    const { orderId } = await chargedAfterGivenUp();
    const before = await refundedCounter();
    const first = await runReconcile(reconcilerDeps());
    expect(first.lateCharges.refunded).toBeGreaterThanOrEqual(1);
    expect(await keptCharges(orderId)).toHaveLength(0);
    expect(await client.listCharges(orderId)).toEqual([
      expect.objectContaining({ status: 'succeeded', refunded: true }),
    ]);
    expect(await refundedCounter()).toBe(before + first.lateCharges.refunded);

    const second = await runReconcile(reconcilerDeps());
    expect(await keptCharges(orderId)).toHaveLength(0);
    expect(await refundedCounter()).toBe(before + first.lateCharges.refunded + second.lateCharges.refunded);
    expect((await db.order.findUniqueOrThrow({ where: { id: orderId } })).status).toBe('payment_failed');
  });

  it('protected: a charge the provider finishes late, with no web process left to see it, is refunded too', async () => {
    const { sku, orderId } = await pendingOrder();
    await ageOrdersOf(sku, 10);
    await reconcilePendingOrders(reconcilerDeps());
    const order = await db.order.findUniqueOrThrow({ where: { id: orderId } });
    expect(order.status).toBe('payment_failed');
    // The provider completes the order's charge request now (same key the checkout sent).
    const late = await client.charge({
      amountCents: order.totalCents,
      currency: order.currency,
      source: 'tok_visa',
      orderId,
      idempotencyKey: `order_${orderId}`,
    });
    expect(late.outcome).toBe('succeeded');
    expect(await keptCharges(orderId)).toHaveLength(1);

    await runReconcile(reconcilerDeps());
    expect(await keptCharges(orderId)).toHaveLength(0);
    expect(await stockOf(sku)).toBe(5);
  });
});
