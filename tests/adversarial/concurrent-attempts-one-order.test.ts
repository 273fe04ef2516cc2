/**
 * Red team of the money path (and the soak's 500s) — two attempts of ONE intent run at once: a slow attempt whose
 * lease ran out while a retry took the key over (the soak's 2 s lease on a starved machine does this), or a
 * waiter taking over a dead lease. Both read "no order yet" and both try to reserve it. The loser must resume the
 * winner's order (same id: the intent's), never answer 500 "Unique constraint failed on orders_pkey" — which the
 * soak logged 5 times in one 20-round run before this was fixed.
 */
import type { PaymentProvider } from '@idem/payments';
import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env } from '~/env';
import { db } from '~/server/db';
import { enqueueFulfilmentIn } from '~/server/jobs';
import { placeOrder } from '~/server/services/place-order';
import {
  afterOrderLookup,
  aliceCart,
  productWithStock,
  type RunningProvider,
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

/**
 * The real database, except that the first `readers` order look-ups wait for each other: every attempt has read
 * "no order" before any of them inserts one — the interleaving the soak hit by chance, forced.
 */
function databaseWhereAttemptsRead(readers: number) {
  let arrived = 0;
  let release: () => void = () => {};
  const allRead = new Promise<void>((resolve) => {
    release = resolve;
  });
  const racing = afterOrderLookup(db, async () => {
    if (arrived >= readers) return;
    arrived += 1;
    if (arrived === readers) release();
    await allRead;
  });
  return { racing, readsBeforeAnyInsert: () => arrived };
}

describe('two attempts of one intent reserve at the same moment', () => {
  it('one order, one charge, no 500: the attempt that lost the insert resumes the order', async () => {
    const sku = await productWithStock(5);
    const request = {
      principalId: 'user:race-test',
      orderId: crypto.randomUUID(),
      clientRef: null,
      input: aliceCart(sku, 2),
    };
    const { racing, readsBeforeAnyInsert } = databaseWhereAttemptsRead(2);
    const deps = {
      db: racing,
      provider: client,
      newOrderLimit: env.newOrderLimit,
      enqueueFulfilment: enqueueFulfilmentIn,
    };
    const outcomes = await Promise.allSettled([placeOrder(deps, request), placeOrder(deps, request)]);
    expect(readsBeforeAnyInsert()).toBe(2); // the race did happen

    for (const outcome of outcomes) {
      if (outcome.status === 'fulfilled') expect(outcome.value.status).toBe('paid');
      else {
        // Only "still running elsewhere, retry": the provider's own key holds the loser's charge back.
        expect(outcome.reason).toBeInstanceOf(TRPCError);
        expect((outcome.reason as TRPCError).code).toBe('SERVICE_UNAVAILABLE');
      }
    }
    expect(outcomes.some((outcome) => outcome.status === 'fulfilled')).toBe(true);
    const again = await placeOrder(
      { db, provider: client, newOrderLimit: env.newOrderLimit, enqueueFulfilment: enqueueFulfilmentIn },
      request,
    );
    expect([again.id, again.status]).toEqual([request.orderId, 'paid']);
    expect(await db.order.count({ where: { items: { some: { sku } } } })).toBe(1);
    expect(await succeededChargesFor(client, sku)).toBe(1);
    expect(await stockOf(sku)).toBe(3);
  });
});
