/**
 * Shared set-up for the adversarial checkout tests: the real test database, a real provider process on loopback
 * (test knobs on, no webhook delivery unless asked), callers as one principal with a chosen key, and products of
 * their own so parallel test files never share stock.
 */

import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { createProviderClient, type PaymentProvider } from '@idem/payments';
import { startProvider } from '@idem/provider';
import type { Logger } from '@idem/worker';
import { TRPCError } from '@trpc/server';
import { expect } from 'vitest';
import { db } from '~/server/db';
import { reasonOf } from '~/server/errors';
import { createCaller } from '~/server/root';
import { createTRPCContext } from '~/server/trpc';

export type RunningProvider = Awaited<ReturnType<typeof startProvider>>;

export async function startCheckoutWorld() {
  await seedDatabase(db);
  const provider = await startProvider({
    databaseUrl: process.env.DATABASE_URL ?? '',
    port: 0,
    testKnobs: true,
  });
  const client = createProviderClient({ baseUrl: provider.url, secretKey: 'sk_test_idem', timeoutMs: 2_000 });
  return { provider, client };
}

const [alice] = demoUsers;

/** One request of Alice's with `key`, through `provider` (the real client, or a test-side wrapper of it). */
export function aliceRequest(key: string, provider: PaymentProvider) {
  return createCaller(() =>
    createTRPCContext({
      headers: new Headers({ authorization: `Bearer ${alice?.token}`, 'idempotency-key': key }),
      deps: { provider },
    }),
  );
}

/** A product only this test uses, with `stock` units. */
export async function productWithStock(stock: number, priceCents = 4_500) {
  const sku = `ADV-${crypto.randomUUID().slice(0, 8)}`;
  await db.product.create({
    data: { sku, name: `Test lamp ${sku}`, description: 'adversarial test product', priceCents, stock },
  });
  return sku;
}

export async function stockOf(sku: string) {
  return (await db.product.findUniqueOrThrow({ where: { sku } })).stock;
}

export async function setKnobs(provider: RunningProvider, knobs: Record<string, number | boolean>) {
  const response = await fetch(new URL('/__knobs', provider.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(knobs),
  });
  expect(response.status).toBe(200);
}

/** Succeeded charges the provider holds for any order of `sku`. */
export async function succeededChargesFor(provider: PaymentProvider, sku: string) {
  const orders = await db.order.findMany({ where: { items: { some: { sku } } }, select: { id: true } });
  const lists = await Promise.all(orders.map((order) => provider.listCharges(order.id)));
  return lists.flat().filter((charge) => charge.status === 'succeeded').length;
}

/**
 * Ages every record of a key past its retention, as three days would: the app's key row and the provider's key
 * for each of its orders. Nothing waits.
 */
export async function ageKeysPastRetention(key: string, sku: string) {
  await db.$executeRaw`update idempotency_keys set expires_at = now() - interval '1 second' where key = ${key}`;
  const orders = await db.order.findMany({ where: { items: { some: { sku } } }, select: { id: true } });
  for (const order of orders) {
    await db.$executeRaw`
      update provider.idempotency_keys set created_at = now() - interval '73 hours'
       where key = ${`order_${order.id}`}`;
  }
}

/** Ages an order's last charge attempt past the reconciler's wait. */
export async function ageOrdersOf(sku: string, minutes: number) {
  await db.$executeRaw`
    update orders set created_at = now() - make_interval(mins => ${minutes}),
                      charge_attempted_at = charge_attempted_at - make_interval(mins => ${minutes})
     where id in (select order_id from order_items where sku = ${sku})`;
}

export async function caught(promise: Promise<unknown>): Promise<TRPCError> {
  const error = await promise.then(
    () => null,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(TRPCError);
  return error as TRPCError;
}

export const reason = (error: TRPCError) => reasonOf(error);

/**
 * `database` itself, except that every `order.findUnique` runs `afterRead` once its answer is in — the hook a test
 * uses to force an interleaving right after the checkout looked its order up (nothing in the app is changed).
 */
export function afterOrderLookup<TDatabase extends typeof db>(
  database: TDatabase,
  afterRead: () => Promise<void>,
): TDatabase {
  const order = new Proxy(database.order, {
    get(target, property, receiver) {
      if (property !== 'findUnique') return Reflect.get(target, property, receiver);
      return async (...args: Parameters<typeof database.order.findUnique>) => {
        const found = await target.findUnique(...args);
        await afterRead();
        return found;
      };
    },
  });
  return new Proxy(database, {
    get: (target, property, receiver) =>
      property === 'order' ? order : Reflect.get(target, property, receiver),
  });
}

/** Alice's checkout of `quantity` × `sku` with a card that succeeds. */
export const aliceCart = (sku: string, quantity = 2) => ({
  items: [{ sku, quantity }],
  email: 'alice@example.com',
  cardToken: 'tok_visa',
});

/** A reconciler logger that keeps the test output readable. */
export const quietLogger: Logger = { info: () => {}, error: () => {} };
