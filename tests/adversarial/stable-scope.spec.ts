/**
 * Issue 12, item 4, through the real stack (`next start`, its proxy, the provider): an API client that keeps no
 * cookies and sends no `Authorization` retries one key. The proxy mints a guest session for each such request,
 * so each retry would be another guest — another scope, another order, another charge.
 *
 * Plain `fetch` (no cookie jar) is that client.
 * CONTROL: each attempt carries a guest session minted for it alone (a cookie-less page load hands one out):
 * one key → 2 orders and 2 charges, the scope changing under the key.
 * PROTECTED: with no session, the idempotent mutation is refused with 400, which says what to send, and
 * nothing is claimed; the client that keeps the Set-Cookie session gets 1 order, 1 charge and a replay. Pages
 * and queries still work for a fresh guest; a client cannot fake or hide the proxy's marker.
 */
import { expect, test } from '@playwright/test';
import { chargesForOrder } from '../e2e/support.ts';

const baseURL = `http://127.0.0.1:${process.env.E2E_PORT ?? 3100}`;
const SESSION_COOKIE = 'idem_session';
const MINTED_HEADER = 'x-idem-guest-minted';
const order = {
  json: {
    items: [{ sku: 'MUG-STONE', quantity: 1 }],
    email: 'cookieless@example.com',
    cardToken: 'tok_visa',
  },
};

function sessionOf(response: Response): string | null {
  const line = response.headers.getSetCookie().find((cookie) => cookie.startsWith(`${SESSION_COOKIE}=`));
  return line ? (line.slice(SESSION_COOKIE.length + 1).split(';')[0] ?? null) : null;
}

/** A guest session of its own, as the proxy hands one to any cookie-less request. */
async function freshSession(): Promise<string> {
  const session = sessionOf(await fetch(`${baseURL}/`));
  expect(session).toBeTruthy();
  return session ?? '';
}

async function placeOrder(key: string, extraHeaders: Record<string, string> = {}) {
  const response = await fetch(`${baseURL}/api/trpc/checkout.placeOrder`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, ...extraHeaders },
    body: JSON.stringify(order),
  });
  return { response, text: await response.text() };
}

function orderIdOf(text: string): string {
  return (JSON.parse(text) as { result: { data: { json: { id: string } } } }).result.data.json.id;
}

test('CONTROL: one key, each retry in a session minted for it → 2 orders, 2 charges', async () => {
  const key = crypto.randomUUID();
  const first = await placeOrder(key, { cookie: `${SESSION_COOKIE}=${await freshSession()}` });
  const retry = await placeOrder(key, { cookie: `${SESSION_COOKIE}=${await freshSession()}` });
  expect(first.response.status).toBe(200);
  expect(retry.response.status).toBe(200);
  const orders = [orderIdOf(first.text), orderIdOf(retry.text)];
  expect(new Set(orders).size).toBe(2);
  const charges = [...(await chargesForOrder(orders[0] ?? '')), ...(await chargesForOrder(orders[1] ?? ''))];
  expect(charges.filter((charge) => charge.status === 'succeeded')).toHaveLength(2);
});

test('PROTECTED: no session → 400 that says what to send, nothing claimed; keeping the cookie → 1 order, 1 charge', async () => {
  const key = crypto.randomUUID();
  const refused = [await placeOrder(key), await placeOrder(key)];
  for (const attempt of refused) {
    expect(attempt.response.status).toBe(400);
    const body = JSON.parse(attempt.text) as { error: { json: { message: string; data: { code: string } } } };
    expect(body.error.json.data.code).toBe('BAD_REQUEST');
    expect(body.error.json.message).toContain("idem_session cookie from this response's Set-Cookie");
    expect(body.error.json.message).toContain('Authorization: Bearer');
    expect(sessionOf(attempt.response)).toBeTruthy();
  }

  // The advice followed: the session the first refusal set, on the same key. It runs (nothing was claimed)…
  const cookie = `${SESSION_COOKIE}=${sessionOf(refused[0]?.response ?? new Response()) ?? ''}`;
  const kept = await placeOrder(key, { cookie });
  expect(kept.response.status).toBe(200);
  expect(kept.response.headers.get('idempotent-replayed')).toBeNull();
  // …and its retry replays it.
  const again = await placeOrder(key, { cookie });
  expect(again.response.status).toBe(200);
  expect(again.response.headers.get('idempotent-replayed')).toBe('true');
  const orderId = orderIdOf(kept.text);
  expect(orderIdOf(again.text)).toBe(orderId);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});

test('a fresh guest still loads pages and runs queries', async () => {
  const page = await fetch(`${baseURL}/`);
  expect(page.status).toBe(200);
  expect(sessionOf(page)).toBeTruthy();
  const catalog = await fetch(`${baseURL}/api/trpc/catalog.list`);
  expect(catalog.status).toBe(200);
});

test('the marker cannot be faked: sent with a kept session it is ignored, sent without one it is replaced', async () => {
  const session = await freshSession();
  const guestId = (
    JSON.parse(Buffer.from(session.split('.')[1] ?? '', 'base64url').toString()) as { sub: string }
  ).sub;
  const withSession = await placeOrder(crypto.randomUUID(), {
    cookie: `${SESSION_COOKIE}=${session}`,
    // Claims "minted for this request", naming the very guest the client already holds: must change nothing.
    [MINTED_HEADER]: guestId,
  });
  expect(withSession.response.status).toBe(200);

  // A client without a session cannot hide the marker by sending an empty or other value of its own.
  const hidden = await placeOrder(crypto.randomUUID(), { [MINTED_HEADER]: '' });
  expect(hidden.response.status).toBe(400);
});
