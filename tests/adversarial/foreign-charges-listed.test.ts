/**
 * Red team of the money path — the provider's list of an order's charges is the truth about its money, so a list
 * that holds ANOTHER order's charge (a provider or proxy that drops or mangles the `order` filter) must never pay
 * for this one. Order Y is paid; order X is left pending by an outage; X's retry asks the provider and is shown
 * Y's charge, which has X's amount and currency.
 */
import { createProviderClient, type PaymentProvider, ProviderUnavailableError } from '@idem/payments';
import { reconcilePendingOrders } from '@idem/worker';
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
  stockOf,
} from './support/checkout.ts';

let provider: RunningProvider;
let client: PaymentProvider;

beforeAll(async () => {
  ({ provider, client } = await startCheckoutWorld());
});
afterAll(async () => {
  await provider?.close();
});

/** A paid order Y and a pending order X of the same cart (same amount), each under its own key. */
async function paidAndPendingOrders() {
  const sku = await productWithStock(5);
  const input = aliceCart(sku, 2);
  const paid = await aliceRequest(crypto.randomUUID(), client).checkout.placeOrder(input);
  expect(paid.status).toBe('paid');
  const pendingKey = crypto.randomUUID();
  await setKnobs(provider, { failNext: 1 });
  expect((await caught(aliceRequest(pendingKey, client).checkout.placeOrder(input))).code).toBe(
    'SERVICE_UNAVAILABLE',
  );
  const pending = await db.order.findFirstOrThrow({ where: { items: { some: { sku } }, status: 'pending' } });
  return { sku, input, pendingKey, paidId: paid.id, pendingId: pending.id };
}

/** A fetch whose GET /v1/charges?order=<asked> reaches the provider as ?order=<shown>. */
function fetchMangling(asked: string, shown: string): typeof fetch {
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    if (url.pathname === '/v1/charges' && url.searchParams.get('order') === asked)
      url.searchParams.set('order', shown);
    return fetch(url, init);
  };
}

describe('a charge list that holds another order’s charge', () => {
  it('CONTROL (the list taken as it comes, as before): the pending order is marked paid by the other order’s charge', async () => {
    const { sku, input, pendingKey, paidId, pendingId } = await paidAndPendingOrders();
    const trusting: PaymentProvider = {
      charge: (request) => client.charge(request),
      listCharges: (orderId) => client.listCharges(orderId === pendingId ? paidId : orderId),
    };
    const retried = await aliceRequest(pendingKey, trusting).checkout.placeOrder(input);
    expect(retried.status).toBe('paid');
    expect(await client.listCharges(pendingId)).toHaveLength(0); // paid for by no charge at all
    expect(await stockOf(sku)).toBe(1);
  });

  it('protected: the client refuses the list (503, retry later), the order stays pending; the honest answer then charges it once', async () => {
    const { input, pendingKey, paidId, pendingId } = await paidAndPendingOrders();
    const mangled = createProviderClient({
      baseUrl: provider.url,
      secretKey: 'sk_test_idem',
      timeoutMs: 2_000,
      fetch: fetchMangling(pendingId, paidId),
    });
    const refused = await caught(aliceRequest(pendingKey, mangled).checkout.placeOrder(input));
    expect(refused.code).toBe('SERVICE_UNAVAILABLE');
    expect((await db.order.findUniqueOrThrow({ where: { id: pendingId } })).status).toBe('pending');

    const retried = await aliceRequest(pendingKey, client).checkout.placeOrder(input);
    expect(retried.status).toBe('paid');
    const charges = await client.listCharges(pendingId);
    expect(charges.filter((charge) => charge.status === 'succeeded')).toHaveLength(1);
  });

  it('protected: the reconciler counts it as "provider unavailable" and leaves the order alone', async () => {
    const { sku, paidId, pendingId } = await paidAndPendingOrders();
    await ageOrdersOf(sku, 10);
    const mangled = createProviderClient({
      baseUrl: provider.url,
      secretKey: 'sk_test_idem',
      timeoutMs: 2_000,
      fetch: fetchMangling(pendingId, paidId),
    });
    // The run answers only for this order: other files' pending orders are theirs to settle.
    const onlyThisOrder: PaymentProvider = {
      charge: (request) => mangled.charge(request),
      async listCharges(orderId) {
        if (orderId !== pendingId) throw new ProviderUnavailableError('not an order of this test');
        return mangled.listCharges(orderId);
      },
    };
    const fulfilments: string[] = [];
    const summary = await reconcilePendingOrders({
      db,
      provider: onlyThisOrder,
      enqueueFulfilment: async (orderId) => {
        fulfilments.push(orderId);
      },
      log: quietLogger,
    });
    expect(summary.unavailable).toBeGreaterThanOrEqual(1);
    expect((await db.order.findUniqueOrThrow({ where: { id: pendingId } })).status).toBe('pending');
    expect(fulfilments).not.toContain(pendingId);
    expect(await stockOf(sku)).toBe(1);
  });
});
