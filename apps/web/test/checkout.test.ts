/**
 * The checkout's server side through tRPC's createCaller, against the real test database and a real
 * payment provider process (in-process HTTP server on loopback).
 */

import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { createProviderClient } from '@idem/payments';
import { startProvider } from '@idem/provider';
import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env } from '~/env';
import { signGuestSession } from '~/server/auth/session';
import { db } from '~/server/db';
import { reasonOf } from '~/server/errors';
import { createCaller } from '~/server/root';
import { createTRPCContext } from '~/server/trpc';
import { ownCopyOf } from './helpers/own-product.ts';

const [alice, bob] = demoUsers;
let provider: Awaited<ReturnType<typeof startProvider>>;

beforeAll(async () => {
  await seedDatabase(db);
  provider = await startProvider({ databaseUrl: process.env.DATABASE_URL ?? '', port: 0 });
});
afterAll(async () => {
  await provider?.close();
  await db.$disconnect();
});

function callerWith(headers: Record<string, string>, providerUrl = provider.url) {
  return createCaller(() =>
    createTRPCContext({
      headers: new Headers(headers),
      deps: {
        provider: createProviderClient({ baseUrl: providerUrl, secretKey: 'sk_test_idem', timeoutMs: 2_000 }),
      },
    }),
  );
}
// Each caller is one request with a fresh Idempotency-Key (one intent), unless a key is given.
const asAlice = (key: string = crypto.randomUUID()) =>
  callerWith({ authorization: `Bearer ${alice?.token}`, 'idempotency-key': key });
const asBob = (key: string = crypto.randomUUID()) =>
  callerWith({ authorization: `Bearer ${bob?.token}`, 'idempotency-key': key });

async function stockOf(sku: string) {
  return (await db.product.findUniqueOrThrow({ where: { sku } })).stock;
}

async function expectTrpcError(promise: Promise<unknown>, code: TRPCError['code'], reason?: string) {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(TRPCError);
  expect((error as TRPCError).code).toBe(code);
  if (reason) expect(reasonOf(error as TRPCError)).toBe(reason);
  return error as TRPCError;
}

describe('catalog', () => {
  it('lists the seeded products with integer prices', async () => {
    const products = await asAlice().catalog.list();
    expect(products.length).toBeGreaterThanOrEqual(8);
    expect(products.every((product) => Number.isInteger(product.priceCents))).toBe(true);
  });
});

describe('checkout.placeOrder', () => {
  it('prices from the catalog, takes stock, charges once and records the payment', async () => {
    const sku = await ownCopyOf(db, 'MUG-STONE');
    const before = await stockOf(sku);
    const order = await asAlice().checkout.placeOrder({
      items: [
        { sku, quantity: 2 },
        { sku: 'NB-DOT-A5', quantity: 1 },
      ],
      email: 'alice@example.com',
      cardToken: 'tok_visa',
      // A client-sent amount is not part of the input and is stripped by the schema.
      ...{ totalCents: 1 },
    });
    expect(order).toMatchObject({ status: 'paid', totalCents: 2 * 1800 + 1400, currency: 'usd' });
    expect(order.createdAt).toBeInstanceOf(Date);
    expect(await stockOf(sku)).toBe(before - 2);

    const payment = await db.payment.findUniqueOrThrow({ where: { orderId: order.id } });
    expect(payment).toMatchObject({ status: 'succeeded', amountCents: 5000 });
    const charges = await fetch(`${provider.url}/v1/charges?order=${order.id}`, {
      headers: { authorization: 'Bearer sk_test_idem' },
    }).then((response) => response.json() as Promise<{ data: Array<{ id: string }> }>);
    expect(charges.data.map((charge) => charge.id)).toEqual([payment.providerChargeId]);
  });

  it('a declined card is a PAYMENT_REQUIRED error, the order is marked failed and the stock comes back', async () => {
    const sku = await ownCopyOf(db, 'PEN-BRASS');
    const before = await stockOf(sku);
    const error = await expectTrpcError(
      asAlice().checkout.placeOrder({
        items: [{ sku, quantity: 1 }],
        email: 'alice@example.com',
        cardToken: 'tok_chargeDeclined',
      }),
      'PAYMENT_REQUIRED',
      'card_declined',
    );
    expect(error.message).toBe('Your card was declined.');
    expect(await stockOf(sku)).toBe(before);
    const failed = await db.order.findFirstOrThrow({
      where: {
        principal: { startsWith: 'user:' },
        status: 'payment_failed',
        items: { some: { sku } },
      },
      include: { payment: true },
    });
    expect(failed.payment).toMatchObject({ status: 'failed', failureCode: 'card_declined' });
  });

  it('refuses more than the stock, changing nothing', async () => {
    const sku = await ownCopyOf(db, 'TEA-SENCHA');
    const before = await stockOf(sku);
    const teaOrders = { items: { some: { sku } } };
    const ordersBefore = await db.order.count({ where: teaOrders });
    await expectTrpcError(
      asAlice().checkout.placeOrder({
        items: [{ sku, quantity: before + 1 }],
        email: 'alice@example.com',
        cardToken: 'tok_visa',
      }),
      'UNPROCESSABLE_CONTENT',
      'out_of_stock',
    );
    expect(await stockOf(sku)).toBe(before);
    expect(await db.order.count({ where: teaOrders })).toBe(ordersBefore);
  });

  it('refuses an unknown SKU', async () => {
    await expectTrpcError(
      asAlice().checkout.placeOrder({
        items: [{ sku: 'NO-SUCH-THING', quantity: 1 }],
        email: 'alice@example.com',
        cardToken: 'tok_visa',
      }),
      'UNPROCESSABLE_CONTENT',
      'unknown_product',
    );
  });

  it.each([
    ['an empty cart', { items: [], email: 'a@example.com', cardToken: 'tok_visa' }],
    [
      'a zero quantity',
      { items: [{ sku: 'MUG-STONE', quantity: 0 }], email: 'a@example.com', cardToken: 'tok_visa' },
    ],
    [
      'a fractional quantity',
      { items: [{ sku: 'MUG-STONE', quantity: 1.5 }], email: 'a@example.com', cardToken: 'tok_visa' },
    ],
    ['a bad email', { items: [{ sku: 'MUG-STONE', quantity: 1 }], email: 'nope', cardToken: 'tok_visa' }],
    [
      'a non-token card',
      { items: [{ sku: 'MUG-STONE', quantity: 1 }], email: 'a@example.com', cardToken: '4242424242424242' },
    ],
    [
      'a repeated SKU',
      {
        items: [
          { sku: 'MUG-STONE', quantity: 1 },
          { sku: 'MUG-STONE', quantity: 1 },
        ],
        email: 'a@example.com',
        cardToken: 'tok_visa',
      },
    ],
  ])('rejects %s with BAD_REQUEST', async (_name, input) => {
    // Deliberately invalid input: the static type would reject it, the runtime schema must too.
    await expectTrpcError(asAlice().checkout.placeOrder(input as never), 'BAD_REQUEST');
  });

  it('a provider outage is a 503 that leaves no paid order, and a retry with the same key finishes it', async () => {
    const sku = await ownCopyOf(db, 'BOTTLE-STEEL');
    const key = crypto.randomUUID();
    const input = {
      items: [{ sku, quantity: 1 }],
      email: 'alice@example.com',
      cardToken: 'tok_visa',
    };
    const before = await stockOf(sku);
    const closedPort = 'http://127.0.0.1:9'; // discard port: nothing listens
    const error = await expectTrpcError(
      callerWith(
        { authorization: `Bearer ${alice?.token}`, 'idempotency-key': key },
        closedPort,
      ).checkout.placeOrder(input),
      'SERVICE_UNAVAILABLE',
    );
    expect(error.name).toBe('PaymentProviderUnavailableError');
    const pending = await db.order.findMany({
      where: { status: 'pending', items: { some: { sku } } },
    });
    expect(pending).toHaveLength(1);

    // The key was released (a transient failure is not stored): the retry resumes the same order.
    const order = await asAlice(key).checkout.placeOrder(input);
    expect(order).toMatchObject({ id: pending[0]?.id, status: 'paid' });
    expect(await stockOf(sku)).toBe(before - 1);
  });
});

describe('principals', () => {
  it('rejects an unknown bearer token instead of treating the caller as a guest', async () => {
    await expectTrpcError(
      callerWith({ authorization: 'Bearer idem_not_a_real_token' }).orders.list(),
      'UNAUTHORIZED',
    );
  });

  it('rejects a request with neither a session nor a token', async () => {
    await expectTrpcError(callerWith({}).orders.list(), 'UNAUTHORIZED');
  });

  it('rejects a forged session cookie', async () => {
    const forged = await signGuestSession(crypto.randomUUID(), 'x'.repeat(40));
    await expectTrpcError(callerWith({ cookie: `idem_session=${forged}` }).orders.list(), 'UNAUTHORIZED');
  });

  it('a guest session is a principal of its own', async () => {
    const session = await signGuestSession(crypto.randomUUID(), env.SESSION_SECRET);
    const guest = callerWith({ cookie: `idem_session=${session}` });
    expect(await guest.orders.list()).toEqual([]);
  });

  it('an order is invisible to another principal', async () => {
    const order = await asAlice().checkout.placeOrder({
      items: [{ sku: 'PLANT-POT', quantity: 1 }],
      email: 'alice@example.com',
      cardToken: 'tok_visa',
    });
    expect((await asAlice().orders.byId({ id: order.id })).id).toBe(order.id);
    await expectTrpcError(asBob().orders.byId({ id: order.id }), 'NOT_FOUND', 'order_not_found');
    expect((await asBob().orders.list()).some((other) => other.id === order.id)).toBe(false);
  });
});
