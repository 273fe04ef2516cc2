/**
 * Red team of the money path — a late retry and the reconciler decide the same pending order at the same
 * moment. The reconciler reads the provider's record (nothing charged), then locks the row and gives the order
 * up; the retry reads the same record, stamps its attempt and charges. Whatever the interleaving of
 * stamp / list / lock / charge, the result must be ONE of:
 *   - the retry won: order paid, 1 charge, stock held by the order;
 *   - the reconciler won: order cancelled, the retry answered 402 payment_abandoned, 0 charges, stock back.
 * Never a charge on a cancelled order, never a paid order without its charge. Each run starts the retry at a
 * different moment: the retry starts right after the reconciler's provider read, and the reconciler takes its
lock 0 to 400 ms later.
 */
import { type PaymentProvider, ProviderUnavailableError } from '@idem/payments';
import { reconcilePendingOrders } from '@idem/worker';
import { TRPCError } from '@trpc/server';
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

async function raceOnce(delayMs: number) {
  const sku = await productWithStock(5);
  const key = crypto.randomUUID();
  const input = aliceCart(sku, 2);
  await setKnobs(provider, { failNext: 1 });
  expect((await caught(aliceRequest(key, client).checkout.placeOrder(input))).code).toBe(
    'SERVICE_UNAVAILABLE',
  );
  const order = await db.order.findFirstOrThrow({ where: { items: { some: { sku } } } });
  await ageOrdersOf(sku, 10);

  let retry: Promise<unknown> = Promise.resolve();
  const reconcilerView: PaymentProvider = {
    charge: (request) => client.charge(request),
    async listCharges(orderId) {
      if (orderId !== order.id) throw new ProviderUnavailableError('not an order of this test');
      const charges = await client.listCharges(orderId);
      // The customer's retry arrives now; the reconciler goes on to lock and decide `delayMs` later.
      retry = aliceRequest(key, client)
        .checkout.placeOrder(input)
        .then(
          (view) => view,
          (error: unknown) => error,
        );
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return charges;
    },
  };
  await reconcilePendingOrders({
    db,
    provider: reconcilerView,
    enqueueFulfilment: async () => {},
    log: quietLogger,
  });
  const answer = await retry;
  const settled = await db.order.findUniqueOrThrow({ where: { id: order.id } });
  return {
    answer,
    status: settled.status,
    charges: await succeededChargesFor(client, sku),
    stock: await stockOf(sku),
  };
}

describe('a late retry racing the reconciler for one pending order', () => {
  it('ends in exactly one consistent decision, whatever the interleaving', async () => {
    const winners = { retry: 0, reconciler: 0 };
    for (const delayMs of [0, 5, 10, 20, 40, 60, 80, 100, 150, 200, 300, 400]) {
      const { answer, status, charges, stock } = await raceOnce(delayMs);
      if (status === 'paid') {
        winners.retry += 1;
        expect([charges, stock]).toEqual([1, 3]);
        expect(answer).toMatchObject({ status: 'paid' });
      } else {
        winners.reconciler += 1;
        expect([status, charges, stock]).toEqual(['payment_failed', 0, 5]);
        expect(answer).toBeInstanceOf(TRPCError);
        expect(reason(answer as TRPCError)).toBe('payment_abandoned');
      }
    }
    expect(winners.retry + winners.reconciler).toBe(12);
    console.log(
      `[retry vs reconciler] the retry won ${winners.retry}, the reconciler ${winners.reconciler} of 12`,
    );
  });
});
