/**
 * Red team of the money path — the charge the provider made must be the one the order asked for. Something
 * between the shop and the provider (a rewriting proxy, a provider that falls back to another amount or
 * currency) makes the card pay 1 cent for a 90.00 order and answers 200 with that charge. Taken as it comes,
 * the order is paid — and shipped — for 1 cent.
 */
import { createProviderClient, type PaymentProvider, ProviderUnavailableError } from '@idem/payments';
import { reconcilePendingOrders } from '@idem/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { db } from '~/server/db';
import {
  ageOrdersOf,
  aliceCart,
  aliceRequest,
  productWithStock,
  quietLogger,
  type RunningProvider,
  startCheckoutWorld,
} from './support/checkout.ts';

let provider: RunningProvider;
let client: PaymentProvider;

beforeAll(async () => {
  ({ provider, client } = await startCheckoutWorld());
});
afterAll(async () => {
  await provider?.close();
});

/** A fetch that rewrites every charge's amount to 1 on its way to the provider. */
const oneCentProxy: typeof fetch = (input, init) => {
  const url = new URL(input instanceof Request ? input.url : input);
  if (url.pathname !== '/v1/charges' || init?.method !== 'POST' || typeof init.body !== 'string')
    return fetch(url, init);
  return fetch(url, { ...init, body: JSON.stringify({ ...JSON.parse(init.body), amount: 1 }) });
};
const throughProxy = () =>
  createProviderClient({
    baseUrl: provider.url,
    secretKey: 'sk_test_idem',
    timeoutMs: 2_000,
    fetch: oneCentProxy,
  });

/** As before: the charge's answer taken as paying for whatever was asked. */
const amountBlind = (real: PaymentProvider): PaymentProvider => ({
  listCharges: (orderId) => real.listCharges(orderId),
  async charge(request) {
    const result = await real.charge(request);
    return result.outcome === 'succeeded'
      ? { ...result, charge: { ...result.charge, amount: request.amountCents } }
      : result;
  },
});

async function checkoutThrough(via: PaymentProvider) {
  const sku = await productWithStock(5);
  const input = aliceCart(sku, 2);
  const answer = await aliceRequest(crypto.randomUUID(), via)
    .checkout.placeOrder(input)
    .then(
      (view) => view,
      (error: unknown) => error,
    );
  const order = await db.order.findFirstOrThrow({ where: { items: { some: { sku } } } });
  const charges = await client.listCharges(order.id);
  return { sku, answer, order, charges };
}

describe('a charge of another amount than the order’s', () => {
  it('CONTROL (amount not compared, as before): a 90.00 order is paid by a 1-cent charge', async () => {
    const { order, charges } = await checkoutThrough(amountBlind(throughProxy()));
    expect(order.totalCents).toBe(9_000);
    expect(charges.map((charge) => [charge.status, charge.amount])).toEqual([['succeeded', 1]]);
    expect(order.status).toBe('paid');
  });

  it('protected: not paid; the reconciler later flags the order as an anomaly for a human', async () => {
    const { sku, answer, order, charges } = await checkoutThrough(throughProxy());
    expect(answer).toMatchObject({ code: 'INTERNAL_SERVER_ERROR' });
    expect(charges.map((charge) => [charge.status, charge.amount])).toEqual([['succeeded', 1]]);
    expect(order.status).toBe('pending');

    await ageOrdersOf(sku, 10);
    const onlyThisOrder: PaymentProvider = {
      charge: (request) => client.charge(request),
      async listCharges(orderId) {
        if (orderId !== order.id) throw new ProviderUnavailableError('not an order of this test');
        return client.listCharges(orderId);
      },
    };
    const summary = await reconcilePendingOrders({
      db,
      provider: onlyThisOrder,
      enqueueFulfilment: async () => {},
      log: quietLogger,
    });
    expect(summary.anomalies).toBe(1);
    const flagged = await db.order.findUniqueOrThrow({ where: { id: order.id } });
    expect([flagged.status, flagged.reconciledOutcome]).toEqual(['pending', 'anomaly']);
  });
});
