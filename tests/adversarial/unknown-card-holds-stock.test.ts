/**
 * Issue 12, item 2 (first half) — an unknown card token passes the input schema, the provider answers 400, and
 * the checkout used to answer 500, release the key and leave the order pending with its stock reserved: three
 * fresh keys with `tok_bogus` took 6 lamps out of stock for good. A final provider 4xx is a decided outcome now.
 */
import type { PaymentProvider } from '@idem/payments';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { db } from '~/server/db';
import {
  aliceRequest,
  caught,
  productWithStock,
  type RunningProvider,
  reason,
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

/** Today's client: any 4xx but 402 was thrown as a plain Error (a bug of ours), i.e. a 500. */
const rejectionAsBug = (real: PaymentProvider): PaymentProvider => ({
  listCharges: (orderId) => real.listCharges(orderId),
  async charge(request) {
    const result = await real.charge(request);
    if (result.outcome === 'rejected')
      throw new Error(`Payment provider rejected the request: ${result.message}`);
    return result;
  },
});

async function threeBogusCheckouts(via: PaymentProvider) {
  const sku = await productWithStock(6);
  const input = { items: [{ sku, quantity: 2 }], email: 'alice@example.com', cardToken: 'tok_bogus' };
  const errors = [];
  for (let attempt = 0; attempt < 3; attempt += 1)
    errors.push(await caught(aliceRequest(crypto.randomUUID(), via).checkout.placeOrder(input)));
  return { sku, input, errors, stock: await stockOf(sku) };
}

describe('an unknown card token', () => {
  it('CONTROL (a 4xx as our bug, as before): three keys → three 500s, the shop is out of stock for good', async () => {
    const { errors, stock, sku } = await threeBogusCheckouts(rejectionAsBug(client));
    expect(errors.map((error) => error.code)).toEqual(Array(3).fill('INTERNAL_SERVER_ERROR'));
    expect(stock).toBe(0);
    expect(await db.order.count({ where: { items: { some: { sku } }, status: 'pending' } })).toBe(3);
  });

  it('protected: answered like a decline (402 card_invalid), stored, stock released every time', async () => {
    const { errors, stock, sku, input } = await threeBogusCheckouts(client);
    expect(errors.map((error) => [error.code, reason(error)])).toEqual(
      Array(3).fill(['PAYMENT_REQUIRED', 'card_invalid']),
    );
    expect(errors[0]?.message).not.toMatch(/tok_bogus|No such token/);
    expect(stock).toBe(6);
    expect(await db.order.count({ where: { items: { some: { sku } }, status: 'payment_failed' } })).toBe(3);

    // Stored: the same key replays the decided answer and charges nothing.
    const key = crypto.randomUUID();
    const first = await caught(aliceRequest(key, client).checkout.placeOrder(input));
    const again = await caught(aliceRequest(key, client).checkout.placeOrder(input));
    expect([again.code, reason(again)]).toEqual([first.code, reason(first)]);
    expect(await stockOf(sku)).toBe(6);
  });
});
