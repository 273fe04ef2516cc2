/**
 * The soak's remaining 500s — a burst of checkouts on a starved machine: every pooled connection is busy, the
 * checkout's reservation transaction cannot start within Prisma's wait (P2028 "Unable to start a transaction in
 * the given time", logged 37 to 49 times per 20-round soak at load 9–12 on 2 cores). Nothing was reserved or
 * charged, so the honest answer is 503 (retry with the same key), not 500. Here the pool (one connection, the
 * real database) is taken by another transaction right after the checkout read its order. The checkout waits
 * up to 10 s for a connection (as long as it waits for the provider), so a short queue is absorbed.
 */
import { createPrismaClient, type Database } from '@idem/db';
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
let onePool: Database;

beforeAll(async () => {
  ({ provider, client } = await startCheckoutWorld());
  onePool = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? '', max: 1 });
});
afterAll(async () => {
  await onePool?.$disconnect();
  await provider?.close();
});

/**
 * `pool`, where the first order look-up is followed by another transaction holding the only connection until
 * `busyFor(tx)` settles.
 */
function poolTakenAfterTheRead(
  pool: Database,
  busyFor: (tx: Pick<Database, '$executeRaw'>) => Promise<unknown>,
) {
  let holder: Promise<unknown> = Promise.resolve();
  let taken = false;
  const busy = afterOrderLookup(pool, async () => {
    if (taken) return;
    taken = true;
    let holding: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    holder = pool.$transaction(
      async (tx) => {
        holding(); // inside the transaction: the only connection is the holder's
        await busyFor(tx);
      },
      { timeout: 60_000 },
    );
    await held;
  });
  return { busy, released: () => holder };
}

describe('a checkout whose transaction cannot get a connection in time', () => {
  it('answers 503 with nothing reserved or charged; the retry with the same intent is paid once', async () => {
    const sku = await productWithStock(5);
    const request = {
      principalId: 'user:busy-test',
      orderId: crypto.randomUUID(),
      clientRef: null,
      input: aliceCart(sku, 2),
    };
    // Busy until the checkout has answered: longer than it waits for a connection (10 s), however late its wait
    // ends on a loaded machine.
    let answered: () => void = () => {};
    const checkoutAnswered = new Promise<void>((resolve) => {
      answered = resolve;
    });
    const { busy, released } = poolTakenAfterTheRead(onePool, () => checkoutAnswered);
    const failure = await placeOrder(
      {
        db: busy,
        provider: client,
        newOrderLimit: env.newOrderLimit,
        enqueueFulfilment: enqueueFulfilmentIn,
      },
      request,
    ).then(
      () => null,
      (error: unknown) => error,
    );
    answered();
    await released();
    expect(failure).toBeInstanceOf(TRPCError);
    expect((failure as TRPCError).code).toBe('SERVICE_UNAVAILABLE');
    expect(await db.order.count({ where: { id: request.orderId } })).toBe(0);
    expect(await stockOf(sku)).toBe(5);
    expect(await succeededChargesFor(client, sku)).toBe(0);

    const retried = await placeOrder(
      { db, provider: client, newOrderLimit: env.newOrderLimit, enqueueFulfilment: enqueueFulfilmentIn },
      request,
    );
    expect([retried.id, retried.status]).toEqual([request.orderId, 'paid']);
    expect(await succeededChargesFor(client, sku)).toBe(1);
    expect(await stockOf(sku)).toBe(3);
  });

  it('a connection busy for 3 s (a burst queued on one product): the checkout waits for it and is paid', async () => {
    const sku = await productWithStock(5);
    const request = {
      principalId: 'user:busy-test',
      orderId: crypto.randomUUID(),
      clientRef: null,
      input: aliceCart(sku, 2),
    };
    const { busy, released } = poolTakenAfterTheRead(onePool, (tx) => tx.$executeRaw`select pg_sleep(3)`);
    const placed = await placeOrder(
      {
        db: busy,
        provider: client,
        newOrderLimit: env.newOrderLimit,
        enqueueFulfilment: enqueueFulfilmentIn,
      },
      request,
    );
    await released();
    expect([placed.id, placed.status]).toEqual([request.orderId, 'paid']);
    expect(await succeededChargesFor(client, sku)).toBe(1);
  });
});
