/**
 * Issue 27, item 4: nothing limited how many orders one principal creates. 200 declined checkouts with fresh
 * keys from one token made 200 orders, 200 provider charges and 200 key rows kept 72 h, and never a 429 — card
 * testing at the shop's expense. The checkout now refuses a principal's new order past
 * `IDEM_NEW_ORDERS_PER_PRINCIPAL` per `IDEM_NEW_ORDERS_WINDOW_SECONDS` (defaults 30 per 10 min) with 429 +
 * Retry-After, before anything is reserved, charged or stored; a replay, and the order of a key already placed,
 * are never limited. The same check refuses a new order past `IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS` (60) from one
 * client address, whatever the guest session (a script can mint a session per checkout), and past
 * `IDEM_PENDING_ORDERS_PER_PRINCIPAL` (5) orders of the principal still waiting for their payment.
 *
 * The app's own router and HTTP handler over loopback, built with a limit of 3 (the suites lift the default:
 * tests/setup/env.ts); the CONTROL is the same router with the limit out of reach, as the app was.
 */
import { randomUUID } from 'node:crypto';
import { seedDatabase } from '@idem/dev-db/seed';
import { startProvider } from '@idem/provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LoopbackServer, serveOnLoopback } from '../../apps/web/test/helpers/loopback-http.ts';

const OUT_OF_REACH = 1_000_000;
const LIMIT = { max: 3, maxPerClient: OUT_OF_REACH, maxPending: OUT_OF_REACH, windowSeconds: 600 };
const PER_ADDRESS = { max: OUT_OF_REACH, maxPerClient: 3, maxPending: OUT_OF_REACH, windowSeconds: 600 };
const PENDING = { max: OUT_OF_REACH, maxPerClient: OUT_OF_REACH, maxPending: 2, windowSeconds: 600 };

let provider: Awaited<ReturnType<typeof startProvider>>;
let limited: LoopbackServer;
let unlimited: LoopbackServer;
let perAddress: LoopbackServer;
let pendingCapped: LoopbackServer;
let sessionCookieFor: (guestId: string) => Promise<string>;
let db: typeof import('~/server/db')['db'];
/** A product of this file's own, so no other file's checkouts take its stock. */
let sku: string;

beforeAll(async () => {
  provider = await startProvider({ databaseUrl: process.env.DATABASE_URL ?? '', port: 0, testKnobs: true });
  // The app reads its environment once, at first import: point it at this provider before importing it.
  process.env.PROVIDER_URL = provider.url;
  ({ db } = await import('~/server/db'));
  await seedDatabase(db);
  const { productWithStock } = await import('./support/checkout.ts');
  sku = await productWithStock(1_000);
  const { createTrpcHandler } = await import('~/app/api/trpc/handler');
  const { createAppRouter } = await import('~/server/root');
  const { idempotency } = await import('~/server/idempotency');
  const { orderIdForIntent } = await import('~/server/services/place-order');
  const { enqueueFulfilmentIn } = await import('~/server/jobs');
  const { env } = await import('~/env');
  const { SESSION_COOKIE, signGuestSession } = await import('~/server/auth/session');
  const serve = async (newOrderLimit: typeof LIMIT) => {
    const handler = createTrpcHandler(
      createAppRouter({
        idempotency,
        orderIdFor: orderIdForIntent,
        newOrderLimit,
        enqueueFulfilment: enqueueFulfilmentIn,
      }),
    );
    return serveOnLoopback({ GET: handler, POST: handler });
  };
  limited = await serve(LIMIT);
  unlimited = await serve({
    max: OUT_OF_REACH,
    maxPerClient: OUT_OF_REACH,
    maxPending: OUT_OF_REACH,
    windowSeconds: 600,
  });
  perAddress = await serve(PER_ADDRESS);
  pendingCapped = await serve(PENDING);
  sessionCookieFor = async (guestId) =>
    `${SESSION_COOKIE}=${await signGuestSession(guestId, env.SESSION_SECRET)}`;
}, 60_000);
afterAll(async () => {
  await limited?.close();
  await unlimited?.close();
  await perAddress?.close();
  await pendingCapped?.close();
  await provider?.close();
});

interface Answer {
  status: number;
  retryAfter: string | null;
  body: {
    error?: { json?: { message?: string; data?: { code?: string; httpStatus?: number; reason?: string } } };
  };
}

/**
 * A guest's checkout of one mug with `card`, under `key`, through `server`; from `address` (the X-Forwarded-For
 * that `next start` or a proxy in front of it writes; loopback HTTP here carries it as the test sets it).
 */
async function checkout(
  server: LoopbackServer,
  cookie: string,
  key: string,
  card = 'tok_chargeDeclined',
  address = '192.0.2.1',
) {
  const response = await fetch(`${server.url}/api/trpc/checkout.placeOrder`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      cookie,
      'idempotency-key': key,
      'x-forwarded-for': address,
    },
    body: JSON.stringify({
      json: { items: [{ sku, quantity: 1 }], email: 'tester@example.com', cardToken: card },
    }),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as Answer['body'],
  } satisfies Answer;
}

const ordersOf = (guestId: string) => db.order.count({ where: { principal: `guest:${guestId}` } });
const keysOf = (guestId: string) => db.idempotencyKey.count({ where: { scope: `guest:${guestId}` } });

describe('new orders per principal', () => {
  it('CONTROL (no reachable limit, as before): 8 declined checkouts with fresh keys → 8 orders, 8 keys kept, no 429', async () => {
    const guest = randomUUID();
    const cookie = await sessionCookieFor(guest);
    const statuses: number[] = [];
    for (let index = 0; index < 8; index += 1)
      statuses.push((await checkout(unlimited, cookie, randomUUID())).status);
    expect(statuses).toEqual(Array(8).fill(402));
    expect(await ordersOf(guest)).toBe(8);
    expect(await keysOf(guest)).toBe(8);
  });

  it('protected: the 4th new order within the window → 429 + Retry-After, nothing reserved, charged or stored', async () => {
    const guest = randomUUID();
    const cookie = await sessionCookieFor(guest);
    const keys = Array.from({ length: 8 }, () => randomUUID());
    const answers: Answer[] = [];
    for (const key of keys) answers.push(await checkout(limited, cookie, key));
    expect(answers.map((answer) => answer.status)).toEqual([402, 402, 402, 429, 429, 429, 429, 429]);
    for (const refused of answers.slice(3)) {
      expect(refused.body.error?.json?.data).toMatchObject({
        code: 'TOO_MANY_REQUESTS',
        httpStatus: 429,
        reason: 'too_many_orders',
      });
      expect(refused.body.error?.json?.message).toMatch(/^Too many new orders: at most 3 in 10 minutes/);
      // Until the first of the three leaves the window: a little under 10 minutes.
      expect(Number(refused.retryAfter)).toBeGreaterThan(500);
      expect(Number(refused.retryAfter)).toBeLessThanOrEqual(600);
    }
    expect(await ordersOf(guest)).toBe(3);
    expect(await keysOf(guest)).toBe(3); // the refused keys were released, not kept for 72 h
    // Declined orders give their unit back; the refused ones never took one.
    expect((await db.product.findUniqueOrThrow({ where: { sku } })).stock).toBe(1_000);

    // A replay of a key already answered is never limited.
    const replay = await checkout(limited, cookie, keys[0] ?? '');
    expect(replay.status).toBe(402);

    // Another principal is not affected.
    const other = await sessionCookieFor(randomUUID());
    expect((await checkout(limited, other, randomUUID())).status).toBe(402);
  });

  it('protected: once the oldest order leaves the window (aged from the test side), the refused key succeeds', async () => {
    const guest = randomUUID();
    const cookie = await sessionCookieFor(guest);
    for (let index = 0; index < 3; index += 1) await checkout(limited, cookie, randomUUID(), 'tok_visa');
    const refusedKey = randomUUID();
    expect((await checkout(limited, cookie, refusedKey, 'tok_visa')).status).toBe(429);
    await db.$executeRaw`
      update orders set created_at = created_at - interval '11 minutes'
       where id = (select id from orders where principal = ${`guest:${guest}`} order by created_at limit 1)`;
    const later = await checkout(limited, cookie, refusedKey, 'tok_visa');
    expect(later.status).toBe(200);
    expect(await ordersOf(guest)).toBe(4);
  });
});

describe('new orders per client address (a guest session minted per checkout)', () => {
  /** `count` checkouts from `address`, each from a guest session of its own, as a script that drops its cookies. */
  async function freshGuests(server: LoopbackServer, count: number, address: string) {
    const answers: Answer[] = [];
    for (let index = 0; index < count; index += 1)
      answers.push(
        await checkout(server, await sessionCookieFor(randomUUID()), randomUUID(), undefined, address),
      );
    return answers;
  }

  it('CONTROL (limits per principal only, as before): 8 guests from one address → 8 orders, no 429', async () => {
    const answers = await freshGuests(unlimited, 8, '198.51.100.8');
    expect(answers.map((answer) => answer.status)).toEqual(Array(8).fill(402));
  });

  it('protected: the 4th new order from one address → 429 whatever the guest; another address is not affected; the address is not stored', async () => {
    const address = '198.51.100.9';
    const answers = await freshGuests(perAddress, 6, address);
    expect(answers.map((answer) => answer.status)).toEqual([402, 402, 402, 429, 429, 429]);
    for (const refused of answers.slice(3)) {
      expect(refused.body.error?.json?.data).toMatchObject({ httpStatus: 429, reason: 'too_many_orders' });
      expect(refused.body.error?.json?.message).toMatch(
        /^Too many new orders from this network address: at most 3 in 10 minutes/,
      );
      expect(Number(refused.retryAfter)).toBeGreaterThan(500);
    }
    expect((await freshGuests(perAddress, 1, '198.51.100.10'))[0]?.status).toBe(402);
    // Behind a proxy the client's own entries come first; the last one is the address the proxy saw.
    expect((await freshGuests(perAddress, 1, `203.0.113.1, ${address}`))[0]?.status).toBe(429);

    const refs = await db.$queryRaw<Array<{ client_ref: string | null }>>`
      select distinct client_ref from orders where created_at > now() - interval '1 minute'
         and client_ref is not null`;
    expect(refs.length).toBeGreaterThan(0);
    for (const { client_ref } of refs) expect(client_ref).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe('orders of one principal waiting for their payment at once', () => {
  /** `count` orders of `guest` left pending (no payment decided yet), made from the test side. */
  async function pendingOrders(guest: string, count: number) {
    const product = await db.product.findUniqueOrThrow({ where: { sku } });
    const ids: string[] = [];
    for (let index = 0; index < count; index += 1) {
      const order = await db.order.create({
        data: {
          principal: `guest:${guest}`,
          email: 'tester@example.com',
          totalCents: product.priceCents,
          items: {
            create: [
              {
                productId: product.id,
                sku,
                name: product.name,
                quantity: 1,
                unitPriceCents: product.priceCents,
              },
            ],
          },
        },
      });
      ids.push(order.id);
    }
    return ids;
  }

  it('CONTROL (no cap on pending orders, as before): with 2 pending, a third new order is placed', async () => {
    const guest = randomUUID();
    await pendingOrders(guest, 2);
    const answer = await checkout(unlimited, await sessionCookieFor(guest), randomUUID(), 'tok_visa');
    expect(answer.status).toBe(200);
  });

  it('protected: with 2 pending, a new order → 429 too_many_pending_orders; once one is decided, the same key is placed', async () => {
    const guest = randomUUID();
    const cookie = await sessionCookieFor(guest);
    const [first] = await pendingOrders(guest, 2);
    const key = randomUUID();
    const refused = await checkout(pendingCapped, cookie, key, 'tok_visa');
    expect(refused.status).toBe(429);
    expect(refused.body.error?.json?.data).toMatchObject({ reason: 'too_many_pending_orders' });
    expect(refused.body.error?.json?.message).toMatch(
      /^Too many orders waiting for their payment: at most 2/,
    );
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    expect(await ordersOf(guest)).toBe(2);

    await db.order.update({ where: { id: first ?? '' }, data: { status: 'payment_failed' } });
    expect((await checkout(pendingCapped, cookie, key, 'tok_visa')).status).toBe(200);
    expect(await ordersOf(guest)).toBe(3);
  });
});
