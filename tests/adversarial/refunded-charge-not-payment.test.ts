/**
 * Red team of the money path — a refunded charge is not a payment. An order waits `pending` (its charge's
 * response was lost); meanwhile the charge is refunded at the provider (support gave the money back, or a
 * dispute did). The reconciler then finds a succeeded charge of the right amount: read without its `refunded`
 * flag, that marks the order paid and ships goods whose money went back.
 */
import {
  type PaymentProvider,
  ProviderUnavailableError,
  type RefundingPaymentProvider,
} from '@idem/payments';
import { type ReconcileDeps, reconcilePendingOrders } from '@idem/worker';
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
  setKnobs,
  startCheckoutWorld,
} from './support/checkout.ts';

let provider: RunningProvider;
let client: RefundingPaymentProvider;

beforeAll(async () => {
  ({ provider, client } = await startCheckoutWorld());
});
afterAll(async () => {
  await provider?.close();
});

/** A pending order whose lost charge has been refunded at the provider, aged past the reconciler's wait. */
async function pendingOrderWithRefundedCharge() {
  const sku = await productWithStock(5);
  const input = aliceCart(sku, 2);
  await setKnobs(provider, { dropResponseNext: 1 });
  await caught(aliceRequest(crypto.randomUUID(), client).checkout.placeOrder(input));
  const order = await db.order.findFirstOrThrow({ where: { items: { some: { sku } } } });
  expect(order.status).toBe('pending');
  const [charge] = await client.listCharges(order.id);
  expect(charge?.status).toBe('succeeded');
  await client.refund({ chargeId: charge?.id ?? '', idempotencyKey: `support_refund_${order.id}` });
  await ageOrdersOf(sku, 10);
  return order;
}

/** The reconciler's deps, answering only for `orderId` (other files' orders are theirs to settle). */
function reconcilerFor(orderId: string, via: PaymentProvider) {
  const fulfilments: string[] = [];
  const deps: ReconcileDeps = {
    db,
    provider: {
      charge: (request) => via.charge(request),
      async listCharges(id) {
        if (id !== orderId) throw new ProviderUnavailableError('not an order of this test');
        return via.listCharges(id);
      },
    },
    enqueueFulfilment: async (id) => {
      fulfilments.push(id);
    },
    log: quietLogger,
  };
  return { deps, fulfilments };
}

/** As before: the charge list read without the `refunded` flag. */
const blindToRefunds = (real: PaymentProvider): PaymentProvider => ({
  charge: (request) => real.charge(request),
  listCharges: async (orderId) =>
    (await real.listCharges(orderId)).map((charge) => ({ ...charge, refunded: false })),
});

describe('a pending order whose charge was refunded', () => {
  it('CONTROL (refunds not read, as before): the reconciler marks it paid and queues its fulfilment', async () => {
    const order = await pendingOrderWithRefundedCharge();
    const { deps, fulfilments } = reconcilerFor(order.id, blindToRefunds(client));
    await reconcilePendingOrders(deps);
    expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).status).toBe('paid');
    expect(fulfilments).toEqual([order.id]);
  });

  it('protected: it is an anomaly for a human — not paid, nothing shipped', async () => {
    const order = await pendingOrderWithRefundedCharge();
    const { deps, fulfilments } = reconcilerFor(order.id, client);
    const summary = await reconcilePendingOrders(deps);
    expect(summary.anomalies).toBe(1);
    const flagged = await db.order.findUniqueOrThrow({ where: { id: order.id } });
    expect([flagged.status, flagged.reconciledOutcome]).toEqual(['pending', 'anomaly']);
    expect(fulfilments).toEqual([]);
  });
});
