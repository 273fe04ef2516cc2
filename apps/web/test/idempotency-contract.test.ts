/**
 * The Idempotency-Key contract (docs: /work/shared/notes/contract.md, "tRPC over HTTP"), one test per row of
 * its status table, over REAL HTTP: the app's own route handler behind a node:http server on loopback, a real
 * payment provider process (in-process, test knobs on), the run's Postgres. Then 50 parallel retries of one
 * intent, and the same storm against a router WITHOUT the middleware as the control.
 *
 * Every assertion is scoped to this file's own orders, keys and principals: other test files share the
 * database and run at the same time.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPrismaClient, generateApiToken, hashApiToken } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { ENCRYPTED_BODY_PREFIX, encryptStoredResponses, fingerprintRequest } from '@idem/idempotency';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import type { startProvider } from '@idem/provider';
import superjson from 'superjson';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { orderIdForIntent } from '~/server/services/place-order';
import { type CheckoutServers, startCheckoutServers } from './helpers/checkout-servers.ts';
import { type LoopbackServer, rawHttpRequest } from './helpers/loopback-http.ts';

const [alice, bob] = demoUsers;
const PROCEDURE = 'checkout.placeOrder';
const ENDPOINT = `/api/trpc/${PROCEDURE}`;
const run = randomUUID().slice(0, 8).toUpperCase();
// Products of our own: other files' stock checks stay untouched, and ours are exact.
const SKU = `IDEMCT-${run}`;
const SCARCE_SKU = `IDEMCT-SCARCE-${run}`;
const PRICE = 1_500;

const db = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? '', max: 3 });
let provider: Awaited<ReturnType<typeof startProvider>>;
let app: LoopbackServer;
let control: LoopbackServer;
let routePOST: (request: Request) => Promise<Response>;
let servers: CheckoutServers | undefined;
let aliceScope: string;
let bobScope: string;
/** A principal only this file uses, so "nothing was stored" can be checked exactly. */
const carol = { token: generateApiToken(), scope: '' };

beforeAll(async () => {
  await seedDatabase(db);
  await db.product.createMany({
    data: [
      { sku: SKU, name: `Contract test item ${run}`, description: 'test', priceCents: PRICE, stock: 1_000 },
      { sku: SCARCE_SKU, name: `Scarce item ${run}`, description: 'test', priceCents: PRICE, stock: 1 },
    ],
  });
  const carolUser = await db.user.create({
    data: { email: `carol-${run.toLowerCase()}@example.com`, name: 'Carol Contract' },
  });
  await db.apiToken.create({
    data: { userId: carolUser.id, label: 'contract test', tokenHash: hashApiToken(carol.token) },
  });
  carol.scope = `user:${carolUser.id}`;
  const users = await db.user.findMany({ where: { email: { in: [alice?.email ?? '', bob?.email ?? ''] } } });
  aliceScope = `user:${users.find((user) => user.email === alice?.email)?.id}`;
  bobScope = `user:${users.find((user) => user.email === bob?.email)?.id}`;

  servers = await startCheckoutServers(process.env.DATABASE_URL ?? '');
  ({ provider, app, control } = servers);
  routePOST = servers.routePOST;
});

afterEach(async () => {
  if (provider) await fetch(`${provider.url}/__knobs`, { method: 'DELETE' });
});

afterAll(async () => {
  await servers?.close();
  await db.$disconnect();
});

// ---------------------------------------------------------------------------------------------- helpers

interface OrderJson {
  id: string;
  status: string;
  email: string;
  totalCents: number;
  currency: string;
  createdAt: string;
  items: Array<{ sku: string; quantity: number; unitPriceCents: number }>;
  payment: { status: string; providerChargeId: string | null } | null;
}
interface SuccessBody {
  result: { data: { json: OrderJson; meta?: { values?: Record<string, unknown> } } };
}
interface ErrorJson {
  message: string;
  code: number;
  data: {
    code: string;
    httpStatus: number;
    path?: string;
    stack?: string;
    reason?: string;
    fieldErrors?: Record<string, string[]>;
  };
}
interface ErrorBody {
  error: { json: ErrorJson };
}

interface Sent {
  status: number;
  headers: Headers;
  text: string;
}

type CartInput = { items: Array<{ sku: string; quantity: number }>; email: string; cardToken: string };

/** The order id the app derives for (principal, key, request): the fingerprint covers the input as sent. */
function orderIdFor(scope: string, key: string, input: CartInput): string {
  const fingerprint = fingerprintRequest('checkout.placeOrder', superjson.serialize(input));
  return orderIdForIntent({ scope, key, fingerprint });
}

function cart(overrides: Partial<CartInput> & { quantity?: number; sku?: string } = {}): CartInput {
  return {
    items: overrides.items ?? [{ sku: overrides.sku ?? SKU, quantity: overrides.quantity ?? 1 }],
    email: overrides.email ?? 'alice@example.com',
    cardToken: overrides.cardToken ?? 'tok_visa',
  };
}

/** POST /api/trpc/checkout.placeOrder over loopback HTTP with fetch. `key: null` sends no header. */
async function post(options: {
  input?: unknown;
  key?: string | null;
  token?: string;
  body?: string;
  path?: string;
  baseUrl?: string;
}): Promise<Sent> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    authorization: `Bearer ${options.token ?? alice?.token}`,
  };
  if (options.key !== null) headers['idempotency-key'] = options.key ?? randomUUID();
  const response = await fetch(`${options.baseUrl ?? app.url}${options.path ?? ENDPOINT}`, {
    method: 'POST',
    headers,
    body: options.body ?? JSON.stringify({ json: options.input }),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

function orderOf(sent: Sent): OrderJson {
  return (JSON.parse(sent.text) as SuccessBody).result.data.json;
}

function errorOf(sent: Sent): ErrorJson {
  return (JSON.parse(sent.text) as ErrorBody).error.json;
}

/** The error body without `data.stack` (tRPC adds it whenever NODE_ENV !== 'production'). */
function withoutStack(text: string): string {
  const body = JSON.parse(text) as ErrorBody;
  delete body.error.json.data.stack;
  return JSON.stringify(body);
}

async function chargesFor(orderId: string) {
  const response = await fetch(`${provider.url}/v1/charges?order=${orderId}`, {
    headers: { authorization: 'Bearer sk_test_idem' },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: Array<{ id: string; status: string; amount: number }> }).data;
}

async function setKnobs(update: {
  latencyMs?: number;
  failNext?: number;
  dropResponseNext?: number;
  chargeHold?: boolean;
}) {
  const response = await fetch(`${provider.url}/__knobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(update),
  });
  expect(response.status).toBe(200);
}

interface KeyRow {
  fingerprint: string;
  state: string;
  response: string | null;
  http_status: number | null;
  created_at: Date;
  expires_at: Date;
  replay_count: number;
}

async function keyRow(scope: string, key: string): Promise<KeyRow | null> {
  const rows = await db.$queryRaw<KeyRow[]>`
    select fingerprint, state, response, http_status, created_at, expires_at, replay_count
    from idempotency_keys where scope = ${scope} and procedure = ${PROCEDURE} and key = ${key}`;
  return rows[0] ?? null;
}

async function keyRowsOf(scope: string): Promise<number> {
  const rows = await db.$queryRaw<Array<{ count: bigint }>>`
    select count(*) as count from idempotency_keys where scope = ${scope}`;
  return Number(rows[0]?.count ?? -1);
}

async function stockOf(sku: string) {
  return (await db.product.findUniqueOrThrow({ where: { sku } })).stock;
}

function expectNoIdempotencyHeaders(sent: Sent) {
  expect(sent.headers.get('idempotent-replayed')).toBeNull();
  expect(sent.headers.get('retry-after')).toBeNull();
}

// ------------------------------------------------------------------------------------- the status table

describe('Idempotency-Key contract over real HTTP (POST /api/trpc/checkout.placeOrder)', () => {
  it('row 1 — first request, success: 200 with the order, stored, not marked replayed', async () => {
    const key = randomUUID();
    const sent = await post({ input: cart(), key });

    expect(sent.status).toBe(200);
    expectNoIdempotencyHeaders(sent);
    expect(sent.headers.get('content-type')).toMatch(/^application\/json/);
    const body = JSON.parse(sent.text) as SuccessBody;
    expect(body.result.data.json).toMatchObject({
      id: orderIdFor(aliceScope, key, cart()),
      status: 'paid',
      email: 'alice@example.com',
      totalCents: PRICE,
      currency: 'usd',
      items: [{ sku: SKU, quantity: 1, unitPriceCents: PRICE }],
      payment: { status: 'succeeded' },
    });
    expect(body.result.data.meta?.values).toEqual({ createdAt: ['Date'] }); // superjson envelope

    const row = await keyRow(aliceScope, key);
    expect(row).toMatchObject({ state: 'completed', http_status: 200, replay_count: 0 });
    // The row holds no plaintext of the answer (the customer's email, the order): it is encrypted at rest …
    expect(row?.response).toContain(ENCRYPTED_BODY_PREFIX);
    expect(row?.response).not.toContain('alice@example.com');
    expect(row?.response).not.toContain(body.result.data.json.id);
    // … and what it decrypts to is exactly the `data` of the response that was sent.
    const { env } = await import('~/env');
    const stored = await encryptStoredResponses(createPrismaIdempotencyStore(db), {
      secrets: env.responseSecrets,
    }).find({ scope: aliceScope, procedure: PROCEDURE, key });
    expect(stored?.response).toMatchObject({ kind: 'output', body: JSON.stringify(body.result.data) });
    const charges = await chargesFor(body.result.data.json.id);
    expect(charges.map((charge) => charge.status)).toEqual(['succeeded']);
    expect(charges[0]?.id).toBe(body.result.data.json.payment?.providerChargeId);
  });

  describe('row 2 — deterministic business error: stored and replayed', () => {
    it('card declined → 402, same key again → same status, byte-identical body, Idempotent-Replayed', async () => {
      const key = randomUUID();
      const input = cart({ cardToken: 'tok_chargeDeclined' });
      const orderId = orderIdFor(aliceScope, key, input);

      const first = await post({ input, key });
      expect(first.status).toBe(402);
      expectNoIdempotencyHeaders(first);
      expect(errorOf(first)).toMatchObject({
        message: 'Your card was declined.',
        data: { code: 'PAYMENT_REQUIRED', httpStatus: 402, reason: 'card_declined', path: PROCEDURE },
      });
      expect(await keyRow(aliceScope, key)).toMatchObject({ state: 'completed', http_status: 402 });

      const again = await post({ input, key });
      expect(again.status).toBe(402);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      // Everything but tRPC's dev-only stack trace is the same…
      expect(withoutStack(again.text)).toBe(withoutStack(first.text));
      // …and the contract says byte-identical.
      expect.soft(again.text, 'replayed error body must be byte-identical to the first').toBe(first.text);

      const charges = await chargesFor(orderId);
      expect(charges).toHaveLength(1);
      expect(charges[0]?.status).toBe('failed');
      const order = await db.order.findUniqueOrThrow({ where: { id: orderId } });
      expect(order.status).toBe('payment_failed');
      await expect.poll(async () => (await keyRow(aliceScope, key))?.replay_count).toBe(1);
    });

    it('quantity above stock → 422 out_of_stock, stored and replayed byte-identically; no order, no charge', async () => {
      const key = randomUUID();
      const input = cart({ sku: SCARCE_SKU, quantity: 5 });
      const orderId = orderIdFor(aliceScope, key, input);

      const first = await post({ input, key });
      expect(first.status).toBe(422);
      expectNoIdempotencyHeaders(first);
      expect(errorOf(first)).toMatchObject({
        message: expect.stringContaining('left in stock'),
        data: { code: 'UNPROCESSABLE_CONTENT', httpStatus: 422, reason: 'out_of_stock' },
      });

      const again = await post({ input, key });
      expect(again.status).toBe(422);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(errorOf(again).data.reason).toBe('out_of_stock');
      expect(withoutStack(again.text)).toBe(withoutStack(first.text));
      expect.soft(again.text, 'replayed error body must be byte-identical to the first').toBe(first.text);

      expect(await stockOf(SCARCE_SKU)).toBe(1);
      expect(await db.order.findUnique({ where: { id: orderId } })).toBeNull();
      expect(await chargesFor(orderId)).toHaveLength(0);
    });
  });

  it('row 3 — transient failure (provider 500) → 503, key released; the retry runs again and charges once', async () => {
    const key = randomUUID();
    const input = cart();
    const orderId = orderIdFor(aliceScope, key, input);
    await setKnobs({ failNext: 1 });

    const first = await post({ input, key });
    expect(first.status).toBe(503);
    expectNoIdempotencyHeaders(first);
    expect(errorOf(first).data).toMatchObject({ code: 'SERVICE_UNAVAILABLE', httpStatus: 503 });
    expect(await keyRow(aliceScope, key)).toBeNull(); // released
    expect(await chargesFor(orderId)).toHaveLength(0);
    expect((await db.order.findUniqueOrThrow({ where: { id: orderId } })).status).toBe('pending');

    const retry = await post({ input, key });
    expect(retry.status).toBe(200);
    expectNoIdempotencyHeaders(retry); // it ran again: not a replay
    expect(orderOf(retry)).toMatchObject({ id: orderId, status: 'paid' });
    const charges = await chargesFor(orderId);
    expect(charges.map((charge) => charge.status)).toEqual(['succeeded']);
  });

  it('row 3 (variant) — the provider charged but its answer was lost → 503, released; the retry charges no second time', async () => {
    const key = randomUUID();
    const input = cart();
    const orderId = orderIdFor(aliceScope, key, input);
    await setKnobs({ dropResponseNext: 1 });

    const first = await post({ input, key });
    expect(first.status).toBe(503);
    expectNoIdempotencyHeaders(first);
    expect(errorOf(first).data.code).toBe('SERVICE_UNAVAILABLE');
    expect(await keyRow(aliceScope, key)).toBeNull();
    expect(await chargesFor(orderId)).toHaveLength(1); // the money moved; the app never heard

    const retry = await post({ input, key });
    expect(retry.status).toBe(200);
    expectNoIdempotencyHeaders(retry);
    expect(orderOf(retry)).toMatchObject({ id: orderId, status: 'paid' });
    const charges = await chargesFor(orderId);
    expect(charges.map((charge) => charge.status)).toEqual(['succeeded']);
    expect(orderOf(retry).payment?.providerChargeId).toBe(charges[0]?.id);
  });

  it('row 4 — header missing → 400 naming Idempotency-Key; nothing stored', async () => {
    for (const token of [alice?.token, carol.token]) {
      const sent = await post({ input: cart(), key: null, token });
      expect(sent.status).toBe(400);
      expectNoIdempotencyHeaders(sent);
      const error = errorOf(sent);
      expect(error.data.code).toBe('BAD_REQUEST');
      expect(error.message).toContain('Idempotency-Key');
    }
    // Carol is this file's own principal: exactly nothing of hers may exist.
    expect(await keyRowsOf(carol.scope)).toBe(0);
    expect(await db.order.count({ where: { principal: carol.scope } })).toBe(0);
  });

  describe('row 5 — malformed header → 400, nothing stored', () => {
    const malformed: Array<[string, string[]]> = [
      ['empty', ['Idempotency-Key: ']],
      ['whitespace only', ['Idempotency-Key:    ']],
      ['256 characters', [`Idempotency-Key: ${'k'.repeat(256)}`]],
      ['256 characters, quoted', [`Idempotency-Key: "${'k'.repeat(256)}"`]],
      ['a tab inside (not printable ASCII)', ['Idempotency-Key: abc\tdef']],
      ['a non-ASCII byte (é, 0xE9)', ['Idempotency-Key: abc\u00e9def']],
      ['a list "a, b"', ['Idempotency-Key: a, b']],
      ['the header sent twice', ['Idempotency-Key: a', 'Idempotency-Key: b']],
      ['a quoted sf-string list', ['Idempotency-Key: "a", "b"']],
      ['the quoted header sent twice', ['Idempotency-Key: "a"', 'Idempotency-Key: "b"']],
      ['an empty quoted string', ['Idempotency-Key: ""']],
      ['a quoted string with parameters', ['Idempotency-Key: "abc";p=1']],
      ['an unterminated quoted string', ['Idempotency-Key: "abc']],
    ];

    it.each(malformed)('%s → 400 BAD_REQUEST naming Idempotency-Key', async (_name, headerLines) => {
      for (const token of [alice?.token, carol.token]) {
        const sent = await rawHttpRequest(app.url, {
          path: ENDPOINT,
          headerLines: ['Content-Type: application/json', `Authorization: Bearer ${token}`, ...headerLines],
          body: JSON.stringify({ json: cart({ email: 'carol@example.com' }) }),
        });
        expect(sent.status).toBe(400);
        expect(sent.header('idempotent-replayed')).toBeUndefined();
        const error = (JSON.parse(sent.body) as ErrorBody).error.json;
        expect(error.data.code).toBe('BAD_REQUEST');
        expect(error.message).toMatch(/Idempotency-Key header is malformed/);
      }
      expect(await keyRowsOf(carol.scope)).toBe(0);
      expect(await db.order.count({ where: { principal: carol.scope } })).toBe(0);
    });

    it('DEL (0x7F): Node refuses the request line itself over the wire; the route rejects it in-process', async () => {
      // fetch will not send it and Node's HTTP parser answers 400 before any application code runs…
      const wire = await rawHttpRequest(app.url, {
        path: ENDPOINT,
        headerLines: [`Authorization: Bearer ${carol.token}`, 'Idempotency-Key: abc\x7fdef'],
        body: JSON.stringify({ json: cart() }),
      });
      expect(wire.status).toBe(400);
      // …so the app's own rule is checked on a Request handed to the route directly.
      const direct = await routePOST(
        new Request(`http://localhost${ENDPOINT}`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${carol.token}`,
            'idempotency-key': 'abc\x7fdef',
          },
          body: JSON.stringify({ json: cart() }),
        }),
      );
      expect(direct.status).toBe(400);
      expect(((await direct.json()) as ErrorBody).error.json.message).toMatch(
        /Idempotency-Key header is malformed: it contains non-printable/,
      );
      expect(await keyRowsOf(carol.scope)).toBe(0);
    });

    it('255 characters is accepted (the upper bound)', async () => {
      const key = `${randomUUID()}${'k'.repeat(255 - 36)}`;
      const sent = await post({ input: cart(), key });
      expect(sent.status).toBe(200);
      expect(orderOf(sent).id).toBe(orderIdFor(aliceScope, key, cart()));
      expect(await keyRow(aliceScope, key)).toMatchObject({ state: 'completed' });
    });

    it('a quoted sf-string "<uuid>" is the SAME key as the bare <uuid> (replay)', async () => {
      const key = randomUUID();
      const input = cart();
      const bare = await post({ input, key });
      expect(bare.status).toBe(200);
      expectNoIdempotencyHeaders(bare);

      const quoted = await post({ input, key: `"${key}"` });
      expect(quoted.status).toBe(200);
      expect(quoted.headers.get('idempotent-replayed')).toBe('true');
      expect(quoted.text).toBe(bare.text);
      expect(orderOf(quoted).id).toBe(orderIdFor(aliceScope, key, input));
      expect(await chargesFor(orderIdFor(aliceScope, key, input))).toHaveLength(1);
    });
  });

  it('row 6 — input fails validation → 400, not stored: the same key with a valid body then runs', async () => {
    const key = randomUUID();
    const invalid = await post({
      input: { items: [], email: 'alice@example.com', cardToken: 'tok_visa' },
      key,
    });
    expect(invalid.status).toBe(400);
    expectNoIdempotencyHeaders(invalid);
    expect(errorOf(invalid).data).toMatchObject({
      code: 'BAD_REQUEST',
      fieldErrors: { items: ['Your cart is empty.'] },
    });
    expect(await keyRow(aliceScope, key)).toBeNull();

    const valid = await post({ input: cart(), key });
    expect(valid.status).toBe(200);
    expectNoIdempotencyHeaders(valid);
    expect(orderOf(valid)).toMatchObject({ id: orderIdFor(aliceScope, key, cart()), status: 'paid' });
  });

  it('row 7 — same key, same input with REORDERED JSON keys (and other whitespace) → byte-identical replay', async () => {
    const key = randomUUID();
    const first = await post({
      body: `{"json":{"items":[{"sku":"${SKU}","quantity":1}],"email":"alice@example.com","cardToken":"tok_visa"}}`,
      key,
    });
    expect(first.status).toBe(200);
    expectNoIdempotencyHeaders(first);

    const reordered = await post({
      body: `{ "json" : { "cardToken": "tok_visa", "email": "alice@example.com", "items": [ { "quantity": 1, "sku": "${SKU}" } ] } }`,
      key,
    });
    expect(reordered.status).toBe(200);
    expect(reordered.headers.get('idempotent-replayed')).toBe('true');
    expect(reordered.text).toBe(first.text);
    expect(await chargesFor(orderOf(first).id)).toHaveLength(1);
    await expect.poll(async () => (await keyRow(aliceScope, key))?.replay_count).toBe(1);
  });

  it('row 8 — same key, different input → 422 UNPROCESSABLE_CONTENT, nothing changed', async () => {
    const key = randomUUID();
    const orderId = orderIdFor(aliceScope, key, cart({ quantity: 1 }));
    const first = await post({ input: cart({ quantity: 1 }), key });
    expect(first.status).toBe(200);
    const rowBefore = await keyRow(aliceScope, key);
    const stockBefore = await stockOf(SKU);

    const different = await post({ input: cart({ quantity: 2 }), key });
    expect(different.status).toBe(422);
    expectNoIdempotencyHeaders(different);
    expect(errorOf(different)).toMatchObject({
      message: expect.stringMatching(/already used with a different request/),
      data: { code: 'UNPROCESSABLE_CONTENT', httpStatus: 422 },
    });

    expect(await keyRow(aliceScope, key)).toEqual(rowBefore);
    expect(await stockOf(SKU)).toBe(stockBefore);
    const order = await db.order.findUniqueOrThrow({ where: { id: orderId }, include: { items: true } });
    expect(order.items.map((item) => item.quantity)).toEqual([1]);
    expect(await chargesFor(orderId)).toHaveLength(1);
    // The original request still replays.
    const original = await post({ input: cart({ quantity: 1 }), key });
    expect(original.headers.get('idempotent-replayed')).toBe('true');
    expect(original.text).toBe(first.text);
  });

  it('row 9 — same key while the first is still running → 409 + Retry-After; afterwards the retry replays', async () => {
    const key = randomUUID();
    const input = cart();
    await setKnobs({ chargeHold: true }); // the provider holds its answer (after charging) until released

    const firstPromise = post({ input, key });
    const held = await fetch(`${provider.url}/__charges/held?atLeast=1&timeoutMs=30000`);
    expect(held.status).toBe(200); // the first request is inside its procedure, mid-payment
    const second = await post({ input, key });
    expect(second.status).toBe(409);
    expect(second.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(errorOf(second)).toMatchObject({
      message: expect.stringMatching(/still being processed/),
      data: { code: 'CONFLICT', httpStatus: 409 },
    });

    expect((await fetch(`${provider.url}/__charges/release`, { method: 'POST' })).status).toBe(200);
    const first = await firstPromise;
    expect(first.status).toBe(200);
    expectNoIdempotencyHeaders(first);

    const retry = await post({ input, key });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    expect(await chargesFor(orderOf(first).id)).toHaveLength(1);
  });

  it("row 10 — same key, another principal (bob) → an independent new order, never alice's result", async () => {
    const key = randomUUID();
    const input = cart();
    const asAlice = await post({ input, key });
    expect(asAlice.status).toBe(200);

    const asBob = await post({ input: { ...input, email: 'alice@example.com' }, key, token: bob?.token });
    expect(asBob.status).toBe(200);
    expectNoIdempotencyHeaders(asBob);
    const aliceOrder = orderOf(asAlice);
    const bobOrder = orderOf(asBob);
    expect(bobOrder.id).not.toBe(aliceOrder.id);
    expect(bobOrder.id).toBe(orderIdFor(bobScope, key, { ...input, email: 'alice@example.com' }));
    expect(asBob.text).not.toContain(aliceOrder.id);
    expect((await db.order.findUniqueOrThrow({ where: { id: bobOrder.id } })).principal).toBe(bobScope);
    expect(await chargesFor(aliceOrder.id)).toHaveLength(1);
    expect(await chargesFor(bobOrder.id)).toHaveLength(1);
    expect(await keyRow(aliceScope, key)).toMatchObject({ state: 'completed' });
    expect(await keyRow(bobScope, key)).toMatchObject({ state: 'completed', replay_count: 0 });
  });

  describe('row 11 — key older than the retention window → treated as new', () => {
    async function expire(scope: string, key: string) {
      const updated = await db.$executeRaw`
        update idempotency_keys set expires_at = now() - interval '1 second'
        where scope = ${scope} and procedure = ${PROCEDURE} and key = ${key}`;
      expect(updated).toBe(1);
    }

    it('same input: a new execution (not a replay) that resumes the already-paid derived order; still one charge', async () => {
      const key = randomUUID();
      const input = cart();
      const first = await post({ input, key });
      expect(first.status).toBe(200);
      const before = await keyRow(aliceScope, key);
      await expire(aliceScope, key);

      const after = await post({ input, key });
      expect(after.status).toBe(200);
      expect(after.headers.get('idempotent-replayed')).toBeNull(); // executed, not replayed
      expect(orderOf(after).id).toBe(orderOf(first).id); // the derived id: the paid order is resumed
      expect(await chargesFor(orderOf(first).id)).toHaveLength(1);
      const row = await keyRow(aliceScope, key);
      expect(row).toMatchObject({ state: 'completed', http_status: 200, replay_count: 0 });
      expect(row?.created_at.getTime()).toBeGreaterThan(
        before?.created_at.getTime() ?? Number.POSITIVE_INFINITY,
      );
      expect(row?.expires_at.getTime()).toBeGreaterThan(Date.now() + 23 * 3600 * 1000);
      console.log(
        `[row 11] expired key, same input: status ${after.status}, replayed header ${after.headers.get('idempotent-replayed')}, ` +
          `same order id ${orderOf(after).id === orderOf(first).id}, body byte-identical to the first ${after.text === first.text}`,
      );
    });

    it('different input: the new request must get an order for ITS cart, not the old order', async () => {
      const key = randomUUID();
      const first = await post({ input: cart({ quantity: 1 }), key });
      expect(first.status).toBe(200);
      await expire(aliceScope, key);
      const stockBefore = await stockOf(SKU);

      // "Treated as new": a new, unrelated request that happens to reuse an old key.
      const after = await post({ input: cart({ quantity: 3 }), key });
      console.log(
        `[row 11] expired key, different input (qty 1 → 3): status ${after.status}, ` +
          `order ${after.status === 200 ? JSON.stringify(orderOf(after).items) : after.text}, ` +
          `stock taken ${stockBefore - (await stockOf(SKU))}`,
      );
      expect(after.status).toBe(200);
      expect(orderOf(after).items).toEqual([
        { sku: SKU, name: expect.any(String), quantity: 3, unitPriceCents: PRICE },
      ]);
      expect(orderOf(after).totalCents).toBe(3 * PRICE);
    });
  });

  describe('row 12 — batching', () => {
    it('two operations in one HTTP request with a key → 400 with a clear message; nothing stored', async () => {
      const key = randomUUID();
      const sent = await post({
        path: `/api/trpc/${PROCEDURE},${PROCEDURE}?batch=1`,
        body: JSON.stringify({ 0: { json: cart() }, 1: { json: cart() } }),
        key,
      });
      expect(sent.status).toBe(400);
      expectNoIdempotencyHeaders(sent);
      const body = JSON.parse(sent.text) as ErrorBody[];
      expect(body).toHaveLength(2);
      for (const entry of body) {
        expect(entry.error.json.data.code).toBe('BAD_REQUEST');
        expect(entry.error.json.message).toMatch(/must be sent alone, not in a batch/);
        expect(entry.error.json.message).toContain('Idempotency-Key');
      }
      expect(await keyRow(aliceScope, key)).toBeNull();
      expect(await db.order.findUnique({ where: { id: orderIdFor(aliceScope, key, cart()) } })).toBeNull();
    });

    it('a batch of ONE operation with the header works, and replays', async () => {
      const key = randomUUID();
      const request = { path: `${ENDPOINT}?batch=1`, body: JSON.stringify({ 0: { json: cart() } }), key };
      const sent = await post(request);
      expect(sent.status).toBe(200);
      expectNoIdempotencyHeaders(sent);
      const body = JSON.parse(sent.text) as SuccessBody[];
      expect(body).toHaveLength(1);
      expect(body[0]?.result.data.json).toMatchObject({
        id: orderIdFor(aliceScope, key, cart()),
        status: 'paid',
      });

      const again = await post(request);
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.text).toBe(sent.text);
      expect(await chargesFor(orderIdFor(aliceScope, key, cart()))).toHaveLength(1);
    });
  });
});

// ------------------------------------------------------------------------------ 50 parallel, and control

describe('50 parallel calls of one intent', () => {
  const PARALLEL = 50;

  it('protected: one order, one payment, one charge; every answer is the first body or 409 + Retry-After', async () => {
    const key = randomUUID();
    const email = `storm-${randomUUID().slice(0, 8)}@example.com`;
    const input = cart({ email });
    const orderId = orderIdFor(aliceScope, key, input);

    const started = performance.now();
    const responses = await Promise.all(Array.from({ length: PARALLEL }, () => post({ input, key })));
    const fresh = responses.filter((r) => r.status === 200 && r.headers.get('idempotent-replayed') === null);
    const replayed = responses.filter(
      (r) => r.status === 200 && r.headers.get('idempotent-replayed') === 'true',
    );
    const conflicts = responses.filter(
      (r) => r.status === 409 && /^\d+$/.test(r.headers.get('retry-after') ?? ''),
    );
    const other = responses.filter(
      (r) => !fresh.includes(r) && !replayed.includes(r) && !conflicts.includes(r),
    );
    expect(other.map((r) => `${r.status} ${r.text.slice(0, 200)}`)).toEqual([]);
    expect(fresh).toHaveLength(1);
    const firstBody = fresh[0]?.text ?? '';
    expect(orderOf(fresh[0] as Sent).id).toBe(orderId);
    for (const response of replayed) expect(response.text).toBe(firstBody);

    // Retry every 409 honouring Retry-After (bounded): each becomes the same stored body.
    let retryRounds = 0;
    const retried = await Promise.all(
      conflicts.map(async (conflict) => {
        let current = conflict;
        for (let attempt = 1; attempt <= 5 && current.status === 409; attempt += 1) {
          const wait = Math.min(Number(current.headers.get('retry-after') ?? '1'), 3) * 1000;
          await sleep(wait);
          current = await post({ input, key });
          retryRounds = Math.max(retryRounds, attempt);
        }
        return current;
      }),
    );
    for (const response of retried) {
      expect(response.status).toBe(200);
      expect(response.headers.get('idempotent-replayed')).toBe('true');
      expect(response.text).toBe(firstBody);
    }
    const elapsedMs = Math.round(performance.now() - started);

    const orders = await db.order.findMany({
      where: { principal: aliceScope, email },
      include: { payment: true },
    });
    const payments = await db.payment.count({ where: { order: { principal: aliceScope, email } } });
    const charges = await chargesFor(orderId);
    console.log(
      `[50-parallel PROTECTED] responses: ${fresh.length} × 200 fresh, ${replayed.length} × 200 replayed, ` +
        `${conflicts.length} × 409 (+Retry-After) → after ≤${retryRounds} retry round(s) all ${retried.length} replayed; ` +
        `orders ${orders.length}, payments ${payments}, provider charges ${charges.length}; ${elapsedMs} ms`,
    );
    expect(orders.map((order) => order.id)).toEqual([orderId]);
    expect(payments).toBe(1);
    expect(charges.map((charge) => charge.status)).toEqual(['succeeded']);
    expect(orders[0]?.payment?.providerChargeId).toBe(charges[0]?.id);
    await expect
      .poll(async () => (await keyRow(aliceScope, key))?.replay_count)
      .toBe(replayed.length + retried.length);
  });

  it('CONTROL: the same storm without the middleware creates more than one order and charge', async () => {
    const key = randomUUID(); // sent, but nothing reads it
    const email = `control-${randomUUID().slice(0, 8)}@example.com`;
    const input = cart({ email });

    const started = performance.now();
    const responses = await Promise.all(
      Array.from({ length: PARALLEL }, () => post({ input, key, baseUrl: control.url })),
    );
    const elapsedMs = Math.round(performance.now() - started);
    const statuses = responses.reduce<Record<number, number>>((counts, r) => {
      counts[r.status] = (counts[r.status] ?? 0) + 1;
      return counts;
    }, {});

    const orders = await db.order.findMany({ where: { principal: aliceScope, email } });
    const payments = await db.payment.count({ where: { order: { principal: aliceScope, email } } });
    const charges = (await Promise.all(orders.map((order) => chargesFor(order.id)))).flat();
    console.log(
      `[50-parallel CONTROL, no middleware] statuses ${JSON.stringify(statuses)}; ` +
        `orders ${orders.length}, payments ${payments}, provider charges ${charges.length} ` +
        `(${charges.reduce((sum, charge) => sum + charge.amount, 0)} cents for one ${PRICE}-cent intent); ${elapsedMs} ms`,
    );
    expect(orders.length).toBeGreaterThan(1);
    expect(charges.length).toBeGreaterThan(1);
    expect(new Set(responses.filter((r) => r.status === 200).map((r) => orderOf(r).id)).size).toBeGreaterThan(
      1,
    );
  });
});
