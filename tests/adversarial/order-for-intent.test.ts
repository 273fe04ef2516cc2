/**
 * `orders.forIntent`, the "what happened to my order?" check behind an expired browser intent: it finds the
 * order an intent made from the intent's key and payload — the order id derived exactly as the checkout derives
 * it — and only in the caller's own scope. Through createCaller against this run's database and a real provider.
 */

import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { createProviderClient } from '@idem/payments';
import { startProvider } from '@idem/provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTrpcHandler } from '~/app/api/trpc/handler';
import { db } from '~/server/db';
import { appRouter, createCaller } from '~/server/root';
import { createTRPCContext } from '~/server/trpc';

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

function callerAs(token: string | undefined, key: string = crypto.randomUUID()) {
  return createCaller(() =>
    createTRPCContext({
      headers: new Headers({ authorization: `Bearer ${token}`, 'idempotency-key': key }),
      deps: {
        provider: createProviderClient({
          baseUrl: provider.url,
          secretKey: 'sk_test_idem',
          timeoutMs: 2_000,
        }),
      },
    }),
  );
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toMatchObject({ name: 'TRPCError' });
  return (error as { code: string }).code;
}

const payload = {
  items: [{ sku: 'MUG-STONE', quantity: 1 }],
  email: 'alice@example.com',
  cardToken: 'tok_visa',
};

describe('orders.forIntent', () => {
  it("finds the order an intent placed, by its key and payload, in the caller's scope only", async () => {
    const key = crypto.randomUUID();
    const placed = await callerAs(alice?.token, key).checkout.placeOrder(payload);

    expect(await callerAs(alice?.token).orders.forIntent({ key, payload })).toEqual({
      order: { id: placed.id, status: 'paid' },
    });
    // Another principal with the very same key and payload: nothing (the id is derived from the caller's scope).
    expect(await callerAs(bob?.token).orders.forIntent({ key, payload })).toEqual({ order: null });
    // Another key: not that intent, no order.
    expect(await callerAs(alice?.token).orders.forIntent({ key: crypto.randomUUID(), payload })).toEqual({
      order: null,
    });
  });

  it("a payload copy that differs from what was sent still finds the order while the key's row exists", async () => {
    const key = crypto.randomUUID();
    const placed = await callerAs(alice?.token, key).checkout.placeOrder(payload);
    const differentCopy = { ...payload, email: 'x@example.com' };

    expect(await callerAs(alice?.token).orders.forIntent({ key, payload: differentCopy })).toEqual({
      order: { id: placed.id, status: 'paid' },
    });
    // Once the server has forgotten the key, only the payload it was sent with names the order.
    await db.idempotencyKey.deleteMany({ where: { key } });
    expect(await callerAs(alice?.token).orders.forIntent({ key, payload: differentCopy })).toEqual({
      order: null,
    });
    expect(await callerAs(alice?.token).orders.forIntent({ key, payload })).toEqual({
      order: { id: placed.id, status: 'paid' },
    });
    expect(await callerAs(bob?.token).orders.forIntent({ key, payload })).toEqual({ order: null });
  });

  it('answers an intent that placed nothing with no order, and creates none', async () => {
    const key = crypto.randomUUID();
    expect(await callerAs(alice?.token).orders.forIntent({ key, payload })).toEqual({ order: null });
    // A read: asking again still finds nothing (the first call placed no order under that intent).
    expect(await callerAs(alice?.token).orders.forIntent({ key, payload })).toEqual({ order: null });
  });

  it('refuses a bad key or an input that cannot be fingerprinted with 400, never a 500', async () => {
    const caller = callerAs(alice?.token);
    expect(await codeOf(caller.orders.forIntent({ key: 'clé', payload }))).toBe('BAD_REQUEST');
    expect(await codeOf(caller.orders.forIntent({ key: '', payload }))).toBe('BAD_REQUEST');
    expect(
      await codeOf(caller.orders.forIntent({ key: crypto.randomUUID(), payload: { email: '\ud800' } })),
    ).toBe('BAD_REQUEST');
  });
});

describe('orders.forIntent over HTTP: its input (the receipt email) never travels in a URL', () => {
  const handler = createTrpcHandler(appRouter);
  const url = 'http://localhost/api/trpc/orders.forIntent';
  const auth = { authorization: `Bearer ${alice?.token}` };

  it('a GET is refused with 405; the same query as POST answers', async () => {
    const key = crypto.randomUUID();
    const placed = await callerAs(alice?.token, key).checkout.placeOrder(payload);
    // superjson's wire form of plain JSON: { json } and no meta.
    const input = JSON.stringify({ json: { key, payload } });

    const get = await handler(new Request(`${url}?input=${encodeURIComponent(input)}`, { headers: auth }));
    expect(get.status).toBe(405);
    expect(await get.text()).toMatch(/send it as POST, not in the URL/);

    const post = await handler(
      new Request(url, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: input,
      }),
    );
    expect(post.status).toBe(200);
    expect(await post.json()).toEqual({
      result: { data: { json: { order: { id: placed.id, status: 'paid' } } } },
    });
  });

  it('control: the other queries keep GET (orders.list answers a GET with 200)', async () => {
    const list = await handler(new Request('http://localhost/api/trpc/orders.list', { headers: auth }));
    expect(list.status).toBe(200);
  });
});
