/**
 * Issue 12, item 4 (in-process half; tests/adversarial/stable-scope.spec.ts runs it through `next start`): a
 * request with neither a session cookie nor `Authorization` gets a guest session minted by the proxy for that
 * very request, so each retry of a client that keeps no cookies lands in a new scope — the same key twice, two
 * orders and two charges.
 *
 * The proxy (`apps/web/src/proxy.ts`, called directly) marks a request whose session it minted and strips any
 * marker a client sends. The checkout route (real HTTP on loopback) then refuses an idempotent mutation of that
 * request with 400 before anything is claimed.
 * CONTROL: two requests with one key, each carrying the session minted for it and no marker (the request as the
 * proxy forwarded it before) → 2 orders.
 * PROTECTED: the same two requests as the proxy forwards them now → 400 each (says what to send), 0 orders; the
 * client that follows the advice (keeps the Set-Cookie session) gets 1 order and a replay.
 */
import { createRequire } from 'node:module';
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CheckoutServers, startCheckoutServers } from '../../apps/web/test/helpers/checkout-servers.ts';

// The web app's own `next` (the root workspace does not depend on it).
const { NextRequest } = createRequire(new URL('../../apps/web/package.json', import.meta.url))(
  'next/server',
) as typeof import('../../apps/web/node_modules/next/server.js');

const MINTED_HEADER = 'x-idem-guest-minted';
const SESSION_COOKIE = 'idem_session';

const db = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? '', max: 2 });
let servers: CheckoutServers;
let proxy: typeof import('../../apps/web/src/proxy.ts')['proxy'];
let verifyGuest: (token: string) => Promise<string | null>;

beforeAll(async () => {
  await seedDatabase(db);
  servers = await startCheckoutServers(process.env.DATABASE_URL ?? '');
  ({ proxy } = await import('../../apps/web/src/proxy.ts'));
  const { env } = await import('~/env');
  const { verifyGuestSession } = await import('~/server/auth/session');
  verifyGuest = (token) => verifyGuestSession(token, env.SESSION_SECRET);
});
afterAll(async () => {
  await servers?.close();
  await db.$disconnect();
});

/** The request headers the proxy forwards to the route (Next's `x-middleware-request-*` override headers). */
function forwardedHeaders(response: Response): Headers {
  const names = (response.headers.get('x-middleware-override-headers') ?? '').split(',').filter(Boolean);
  const headers = new Headers();
  for (const name of names) {
    const value = response.headers.get(`x-middleware-request-${name}`);
    if (value !== null) headers.set(name, value);
  }
  return headers;
}

function sessionFromSetCookie(response: Response): string {
  const cookie = response.headers.getSetCookie().find((line) => line.startsWith(`${SESSION_COOKIE}=`)) ?? '';
  return cookie.slice(SESSION_COOKIE.length + 1).split(';')[0] ?? '';
}

const order = {
  json: { items: [{ sku: 'MUG-STONE', quantity: 1 }], email: 'guest@example.com', cardToken: 'tok_visa' },
};

/** A cookie-less client's placeOrder, as the proxy forwards it; `keepMarker: false` drops the marker (control). */
async function placeOrderWithoutCookie(key: string, { keepMarker }: { keepMarker: boolean }) {
  const proxied = await proxy(
    new NextRequest(`${servers.app.url}/api/trpc/checkout.placeOrder`, { method: 'POST' }),
  );
  const headers = forwardedHeaders(proxied);
  if (!keepMarker) headers.delete(MINTED_HEADER);
  headers.set('content-type', 'application/json');
  headers.set('idempotency-key', key);
  const response = await fetch(`${servers.app.url}/api/trpc/checkout.placeOrder`, {
    method: 'POST',
    headers,
    body: JSON.stringify(order),
  });
  return { response, text: await response.text(), session: sessionFromSetCookie(proxied) };
}

function orderIdOf(text: string): string {
  return (JSON.parse(text) as { result: { data: { json: { id: string } } } }).result.data.json.id;
}

describe('the proxy marks a session it minted, and only it can', () => {
  it('no cookie, no Authorization → a new session, forwarded with the marker naming its guest', async () => {
    const response = await proxy(
      new NextRequest('http://localhost/api/trpc/checkout.placeOrder', { method: 'POST' }),
    );
    const session = sessionFromSetCookie(response);
    const guestId = await verifyGuest(session);
    expect(guestId).toMatch(/^[0-9a-f-]{36}$/);
    const forwarded = forwardedHeaders(response);
    expect(forwarded.get(MINTED_HEADER)).toBe(guestId);
    expect(forwarded.get('cookie')).toContain(`${SESSION_COOKIE}=${session}`);
  });

  it('a marker sent by the client is stripped (valid session, bearer token, or none at all)', async () => {
    const minted = sessionFromSetCookie(await proxy(new NextRequest('http://localhost/', { method: 'GET' })));
    const withSession = await proxy(
      new NextRequest('http://localhost/api/trpc/checkout.placeOrder', {
        method: 'POST',
        headers: {
          cookie: `${SESSION_COOKIE}=${minted}`,
          [MINTED_HEADER]: (await verifyGuest(minted)) ?? '',
        },
      }),
    );
    expect(forwardedHeaders(withSession).get(MINTED_HEADER)).toBeNull();
    expect(withSession.headers.getSetCookie()).toEqual([]);

    const withBearer = await proxy(
      new NextRequest('http://localhost/api/trpc/checkout.placeOrder', {
        method: 'POST',
        headers: { authorization: 'Bearer anything', [MINTED_HEADER]: 'forged' },
      }),
    );
    expect(forwardedHeaders(withBearer).get(MINTED_HEADER)).toBeNull();

    const bare = await proxy(
      new NextRequest('http://localhost/api/trpc/checkout.placeOrder', {
        method: 'POST',
        headers: { [MINTED_HEADER]: 'forged' },
      }),
    );
    expect(forwardedHeaders(bare).get(MINTED_HEADER)).toBe(await verifyGuest(sessionFromSetCookie(bare)));
  });
});

describe('a cookie-less client retrying one key', () => {
  it('CONTROL: each request in the session minted for it, no marker → 2 orders for one key', async () => {
    const key = crypto.randomUUID();
    const first = await placeOrderWithoutCookie(key, { keepMarker: false });
    const retry = await placeOrderWithoutCookie(key, { keepMarker: false });
    expect(first.response.status).toBe(200);
    expect(retry.response.status).toBe(200);
    expect(retry.response.headers.get('Idempotent-Replayed')).toBeNull();
    expect(orderIdOf(first.text)).not.toBe(orderIdOf(retry.text));
  });

  it('PROTECTED: 400 that says what to send, 0 orders; following it → 1 order and a replay', async () => {
    const key = crypto.randomUUID();
    const first = await placeOrderWithoutCookie(key, { keepMarker: true });
    const retry = await placeOrderWithoutCookie(key, { keepMarker: true });
    for (const attempt of [first, retry]) {
      expect(attempt.response.status).toBe(400);
      const body = JSON.parse(attempt.text) as {
        error: { json: { message: string; data: { code: string } } };
      };
      expect(body.error.json.data.code).toBe('BAD_REQUEST');
      expect(body.error.json.message).toMatch(/no stable principal/);
      expect(body.error.json.message).toMatch(/idem_session cookie from this response's Set-Cookie/);
      expect(body.error.json.message).toMatch(/Authorization: Bearer/);
    }
    // Nothing was claimed in the refused request's scope: with its session, the same key runs now…
    const headers = {
      'content-type': 'application/json',
      'idempotency-key': key,
      cookie: `${SESSION_COOKIE}=${first.session}`,
    };
    const send = () =>
      fetch(`${servers.app.url}/api/trpc/checkout.placeOrder`, {
        method: 'POST',
        headers,
        body: JSON.stringify(order),
      });
    const kept = await send();
    expect(kept.status).toBe(200);
    expect(kept.headers.get('Idempotent-Replayed')).toBeNull();
    const keptText = await kept.text();
    // …and its retry is the same order.
    const again = await send();
    expect(again.status).toBe(200);
    expect(again.headers.get('Idempotent-Replayed')).toBe('true');
    expect(orderIdOf(await again.text())).toBe(orderIdOf(keptText));
  });

  it('a fresh guest can still read (non-idempotent procedures are not affected)', async () => {
    const proxied = await proxy(
      new NextRequest(`${servers.app.url}/api/trpc/catalog.list`, { method: 'GET' }),
    );
    const response = await fetch(`${servers.app.url}/api/trpc/catalog.list`, {
      headers: forwardedHeaders(proxied),
    });
    expect(response.status).toBe(200);
  });
});
