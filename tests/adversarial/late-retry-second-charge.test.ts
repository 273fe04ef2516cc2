/**
 * Issue 12, item 1 — a late retry charges the card a second time. The charge's response is lost (the client gets
 * 503, the order stays pending, no webhook), then the same key comes back after the app's key row AND the
 * provider's key have expired. The provider's record is the truth: a resumed order asks it first.
 */
import type { PaymentProvider } from '@idem/payments';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { db } from '~/server/db';
import {
  ageKeysPastRetention,
  aliceCart,
  aliceRequest,
  caught,
  productWithStock,
  type RunningProvider,
  setKnobs,
  startCheckoutWorld,
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

/** Today's checkout never asked the provider: a client whose record of past charges is always empty. */
const withoutLookup = (real: PaymentProvider): PaymentProvider => ({
  charge: (request) => real.charge(request),
  listCharges: async () => [],
});

async function lostChargeThenLateRetry(via: PaymentProvider) {
  const sku = await productWithStock(5);
  const key = crypto.randomUUID();
  const input = aliceCart(sku, 1);

  await setKnobs(provider, { dropResponseNext: 1 });
  const lost = await caught(aliceRequest(key, via).checkout.placeOrder(input));
  expect(lost.code).toBe('SERVICE_UNAVAILABLE');
  expect(await db.order.count({ where: { items: { some: { sku } }, status: 'pending' } })).toBe(1);

  await ageKeysPastRetention(key, sku);
  const retried = await aliceRequest(key, via).checkout.placeOrder(input);
  return { sku, retried, charges: await succeededChargesFor(client, sku) };
}

describe('a retry after every key has expired', () => {
  it('CONTROL (no lookup, as before): the lost charge is charged again — 2 charges for one order', async () => {
    const { charges, retried } = await lostChargeThenLateRetry(withoutLookup(client));
    expect(retried.status).toBe('paid');
    expect(charges).toBe(2);
  });

  it('protected: the resumed order asks the provider, finds the lost charge and is paid by it — 1 charge', async () => {
    const { sku, charges, retried } = await lostChargeThenLateRetry(client);
    expect(charges).toBe(1);
    expect(retried.status).toBe('paid');
    const payment = await db.payment.findUniqueOrThrow({ where: { orderId: retried.id } });
    const [charge] = await client.listCharges(retried.id);
    expect(payment.providerChargeId).toBe(charge?.id);
    expect(await db.order.count({ where: { items: { some: { sku } } } })).toBe(1);
  });
});
