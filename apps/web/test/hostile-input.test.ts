/**
 * Hostile input over REAL HTTP: the app's own tRPC and webhook route handlers behind node:http servers on
 * loopback, a real payment provider process (test knobs on), the run's Postgres. Every case must get a clear
 * 4xx (never a 5xx) with a readable message, store nothing (no order, no idempotency key, no charge), lose
 * nothing (the same caller's next valid request with a fresh key succeeds), and show no other principal's data.
 * The few cases whose correct answer is not a rejection (a key another principal used; an unknown SKU, which
 * the contract stores as a deterministic 422) say so in the summary table printed at the end.
 *
 * Every assertion is scoped to this file's own principals, keys, SKU and orders: other test files share the
 * database and run at the same time.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPrismaClient, generateApiToken, hashApiToken } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { fingerprintRequest } from '@idem/idempotency';
import { startProvider } from '@idem/provider';
import superjson from 'superjson';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { orderIdForIntent } from '~/server/services/place-order';
import {
  type CaseResult,
  errorMessageOf,
  formatSummary,
  SESSION_COOKIE,
  type Sent,
  sendFetch,
  sendRaw,
  signSession,
  signWebhook,
  trpcCodeOf,
  unsignedSession,
} from './helpers/hostile-support.ts';
import { type LoopbackServer, serveOnLoopback } from './helpers/loopback-http.ts';

const PROCEDURE = 'checkout.placeOrder';
const ENDPOINT = `/api/trpc/${PROCEDURE}`;
const run = randomUUID().slice(0, 8).toLowerCase();
const SKU = `HOSTILE-${run.toUpperCase()}`;
const PRICE = 700;
const CAP = 20; // the library's default maxInFlightPerScope, which the app keeps

const db = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? '', max: 4 });
let provider: Awaited<ReturnType<typeof startProvider>>;
let app: LoopbackServer;
let webhooks: LoopbackServer;
let sessionSecret = '';
let webhookSecret = '';
let disconnectAppDb: () => Promise<void> = async () => {};

interface Principal {
  token: string;
  scope: string;
  userId: string;
  email: string;
}
/** The attacker (the caller of every case), the victim whose data must never show, the cap's own caller. */
const mallory = { token: generateApiToken(), scope: '', userId: '', email: `mallory-${run}@example.com` };
const victim = { token: generateApiToken(), scope: '', userId: '', email: `victim-${run}@example.com` };
const capper = { token: generateApiToken(), scope: '', userId: '', email: `capper-${run}@example.com` };
const VICTIM_KEY = randomUUID();
const VICTIM_KEY_2 = randomUUID();
let victimOrderId = '';
let victimOrderId2 = '';

async function createPrincipal(principal: Principal, name: string) {
  const user = await db.user.create({ data: { email: principal.email, name } });
  await db.apiToken.create({
    data: { userId: user.id, label: 'hostile-input test', tokenHash: hashApiToken(principal.token) },
  });
  principal.userId = user.id;
  principal.scope = `user:${user.id}`;
}

beforeAll(async () => {
  await seedDatabase(db);
  await db.product.create({
    data: {
      sku: SKU,
      name: `Hostile test item ${run}`,
      description: 'test',
      priceCents: PRICE,
      stock: 100_000,
    },
  });
  await createPrincipal(mallory, 'Mallory Hostile');
  await createPrincipal(victim, 'Victor Victim');
  await createPrincipal(capper, 'Cap Tester');

  provider = await startProvider({ databaseUrl: process.env.DATABASE_URL ?? '', port: 0, testKnobs: true });
  // The app reads its environment once, at first import: point it at our provider before importing it.
  process.env.PROVIDER_URL = provider.url;
  const { env } = await import('~/env');
  sessionSecret = env.SESSION_SECRET;
  webhookSecret = env.PROVIDER_WEBHOOK_SECRET;
  const trpcRoute = await import('~/app/api/trpc/[trpc]/route');
  app = await serveOnLoopback({ GET: trpcRoute.GET, POST: trpcRoute.POST });
  const webhookRoute = await import('~/app/api/webhooks/provider/route');
  webhooks = await serveOnLoopback({ POST: webhookRoute.POST });
  const appDb = await import('~/server/db');
  disconnectAppDb = () => appDb.db.$disconnect();

  // The victim's own order: its id, email and key must never appear in an answer to anyone else.
  const placed = await post({ token: victim.token, key: VICTIM_KEY, input: cart(victim.email) });
  expect(placed.status).toBe(200);
  victimOrderId = (JSON.parse(placed.text) as { result: { data: { json: { id: string } } } }).result.data.json
    .id;
  const placedAgain = await post({ token: victim.token, key: VICTIM_KEY_2, input: cart(victim.email) });
  expect(placedAgain.status).toBe(200);
  victimOrderId2 = (JSON.parse(placedAgain.text) as { result: { data: { json: { id: string } } } }).result
    .data.json.id;
});

afterEach(async () => {
  if (provider) await fetch(`${provider.url}/__knobs`, { method: 'DELETE' });
});

const results: CaseResult[] = [];

afterAll(async () => {
  console.log(`\n[hostile input] summary\n${formatSummary(results)}\n`);
  await app?.close();
  await webhooks?.close();
  await provider?.close();
  await disconnectAppDb();
  await db.$disconnect();
});

// ---------------------------------------------------------------------------------------------- helpers

type CartInput = { items: Array<{ sku: string; quantity: number }>; email: string; cardToken: string };

function cart(email: string, items: CartInput['items'] = [{ sku: SKU, quantity: 1 }]): CartInput {
  return { items, email, cardToken: 'tok_visa' };
}

type Auth = { token: string } | { cookie: string } | { authorization: string } | 'none';

function authHeaders(auth: Auth): Record<string, string> {
  if (auth === 'none') return {};
  if ('token' in auth) return { authorization: `Bearer ${auth.token}` };
  if ('cookie' in auth) return { cookie: `${SESSION_COOKIE}=${auth.cookie}` };
  return { authorization: auth.authorization };
}

/** POST /api/trpc/checkout.placeOrder with fetch. `key: null` sends no header; `body` overrides `input`. */
function post(options: {
  token?: string;
  auth?: Auth;
  key?: string | null;
  input?: unknown;
  body?: string;
  path?: string;
}): Promise<Sent> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    ...authHeaders(options.auth ?? { token: options.token ?? mallory.token }),
  };
  if (options.key !== null) headers['idempotency-key'] = options.key ?? randomUUID();
  return sendFetch(`${app.url}${options.path ?? ENDPOINT}`, {
    headers,
    body: options.body ?? JSON.stringify({ json: options.input }),
  });
}

/** The same, byte for byte, with header lines fetch would refuse. Mallory's token. */
function postRaw(headerLines: string[], input: unknown): Promise<Sent> {
  return sendRaw(app.url, {
    path: ENDPOINT,
    headerLines: ['Content-Type: application/json', `Authorization: Bearer ${mallory.token}`, ...headerLines],
    body: JSON.stringify({ json: input }),
  });
}

function orderIdFor(scope: string, key: string, input: unknown): string {
  const fingerprint = fingerprintRequest(PROCEDURE, superjson.serialize(input));
  return orderIdForIntent({ scope, key, fingerprint });
}

async function chargesFor(orderId: string): Promise<unknown[]> {
  const response = await fetch(`${provider.url}/v1/charges?order=${orderId}`, {
    headers: { authorization: 'Bearer sk_test_idem' },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: unknown[] }).data;
}

async function keyRowsAnywhere(
  key: string,
): Promise<Array<{ scope: string; state: string; http_status: number | null; replay_count: number }>> {
  return db.$queryRaw`select scope, state, http_status, replay_count from idempotency_keys where key = ${key}`;
}

async function processingKeysOf(scope: string): Promise<number> {
  const rows = await db.$queryRaw<Array<{ n: number }>>`
    select count(*)::int as n from idempotency_keys
    where scope = ${scope} and state = 'processing' and locked_until > now()`;
  return rows[0]?.n ?? -1;
}

function caseEmail(index: number): string {
  return `m-${run}-${index}@example.com`;
}

/** Another principal's data must never be in an answer; nor a stack trace or a server path. */
function expectNoLeak(sent: Sent) {
  for (const secret of [victim.email, victimOrderId, victimOrderId2, victim.userId, victim.token]) {
    expect(sent.text, 'another principal’s data in the response').not.toContain(secret);
  }
  expect(sent.text).not.toMatch(/node_modules|\/work\/|\bat [\w.<>]+ \(/);
}

/** The same caller's next valid request, with a fresh key, still succeeds: nothing was lost. */
async function expectFollowUpSucceeds(auth: Auth = { token: mallory.token }): Promise<string> {
  const email = `followup-${run}-${randomUUID().slice(0, 6)}@example.com`;
  const sent = await post({ auth, input: cart(email) });
  expect(sent.status, `follow-up after the case: ${sent.text.slice(0, 300)}`).toBe(200);
  const order = (JSON.parse(sent.text) as { result: { data: { json: { status: string } } } }).result.data
    .json;
  expect(order.status).toBe('paid');
  return 'ok 200';
}

interface RejectionCase {
  name: string;
  expectedStatus: number;
  expectedCode?: string;
  message?: RegExp;
  send: (ctx: { key: string; email: string }) => Promise<Sent>;
  /** The input sent, when the case's order id can be derived (no charge may exist for it). */
  input?: (ctx: { key: string; email: string }) => unknown;
  followUpAuth?: Auth;
}

let caseCounter = 0;

/**
 * One rejection: the status and code, a readable message, no leak, nothing stored anywhere for this case's key
 * and email, no charge, and the next valid request succeeds.
 */
async function runRejection(spec: RejectionCase) {
  caseCounter += 1;
  const ctx = { key: randomUUID(), email: caseEmail(caseCounter) };
  const ordersBefore = await db.order.count({ where: { principal: mallory.scope } });
  const sent = await spec.send(ctx);
  const code = trpcCodeOf(sent.text) ?? errorMessageOf(sent.text)?.slice(0, 40) ?? '(no body)';
  const result: CaseResult = {
    name: spec.name,
    status: sent.status,
    expected: String(spec.expectedStatus),
    code,
    stored: '?',
    followUp: '?',
  };
  results.push(result);

  expect(sent.status, sent.text.slice(0, 500)).toBeLessThan(500);
  expect(sent.status, sent.text.slice(0, 500)).toBe(spec.expectedStatus);
  if (spec.expectedCode) expect(trpcCodeOf(sent.text)).toBe(spec.expectedCode);
  const message = errorMessageOf(sent.text);
  expect(message, `a readable error message in ${sent.text.slice(0, 300)}`).toBeDefined();
  expect(message?.length).toBeGreaterThan(10);
  if (spec.message) expect(message).toMatch(spec.message);
  expect(sent.header('idempotent-replayed')).toBeNull();
  expectNoLeak(sent);

  // Nothing stored: no key row under any principal, no order for this case, none for mallory, no charge.
  expect(await keyRowsAnywhere(ctx.key)).toEqual([]);
  expect(await db.order.count({ where: { email: ctx.email } })).toBe(0);
  expect(await db.order.count({ where: { principal: mallory.scope } })).toBe(ordersBefore);
  if (spec.input) expect(await chargesFor(orderIdFor(mallory.scope, ctx.key, spec.input(ctx)))).toEqual([]);
  result.stored = 'no';

  result.followUp = await expectFollowUpSucceeds(spec.followUpAuth);
}

function rejection(spec: RejectionCase) {
  it(`${spec.name} → ${spec.expectedStatus}`, () => runRejection(spec));
}

// ------------------------------------------------------------------------------------------------ cases

describe('hostile Idempotency-Key headers', () => {
  rejection({
    name: 'Idempotency-Key missing',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    message: /requires an Idempotency-Key header/,
    send: ({ email }) => post({ key: null, input: cart(email) }),
  });

  const malformed: Array<[string, (key: string) => string[]]> = [
    ['Idempotency-Key empty', () => ['Idempotency-Key: ']],
    ['Idempotency-Key of 256 characters', () => [`Idempotency-Key: ${'k'.repeat(256)}`]],
    [
      'Idempotency-Key non-ASCII (UTF-8 "ключ-…")',
      (key) => [`Idempotency-Key: ${Buffer.from(`ключ-${key}`, 'utf8').toString('latin1')}`],
    ],
    ['Idempotency-Key with a control character (TAB)', (key) => [`Idempotency-Key: ${key}\tx`]],
    ['Idempotency-Key list-valued "a, b"', (key) => [`Idempotency-Key: ${key}, ${key}-2`]],
    ['Idempotency-Key header sent twice', (key) => [`Idempotency-Key: ${key}`, `Idempotency-Key: ${key}-2`]],
    ['Idempotency-Key an sf-list of strings', (key) => [`Idempotency-Key: "${key}", "x"`]],
  ];
  for (const [name, lines] of malformed) {
    rejection({
      name,
      expectedStatus: 400,
      expectedCode: 'BAD_REQUEST',
      message: /Idempotency-Key header is malformed/,
      send: ({ key, email }) => postRaw(lines(key), cart(email)),
    });
  }

  // Each variant takes one of the victim's keys: under mallory's own scope each is then a fresh key.
  for (const variant of ['same input', 'different input'] as const) {
    it(`another principal's key (${variant}) → an independent order, never the other's result`, async () => {
      const [key, theirOrderId] =
        variant === 'same input' ? [VICTIM_KEY, victimOrderId] : [VICTIM_KEY_2, victimOrderId2];
      const input =
        variant === 'same input' ? cart(victim.email) : cart(caseEmail(900), [{ sku: SKU, quantity: 2 }]);
      const sent = await post({ key, input });
      const result: CaseResult = {
        name: `another principal's key (${variant})`,
        status: sent.status,
        expected: '200 (independent)',
        code: trpcCodeOf(sent.text) ?? '–',
        stored: '?',
        followUp: '?',
      };
      results.push(result);
      // Same key, another scope: a new, unrelated request (never a replay of the victim's, never a 422 that would
      // reveal the key exists elsewhere).
      expect(sent.status, sent.text.slice(0, 300)).toBe(200);
      expect(sent.header('idempotent-replayed')).toBeNull();
      const order = (JSON.parse(sent.text) as { result: { data: { json: { id: string } } } }).result.data
        .json;
      expect(order.id).not.toBe(theirOrderId);
      expect(order.id).toBe(orderIdFor(mallory.scope, key, input));
      expect(sent.text).not.toContain(victimOrderId);
      expect(sent.text).not.toContain(victimOrderId2);
      expect(sent.text).not.toContain(victim.userId);
      expect((await db.order.findUniqueOrThrow({ where: { id: order.id } })).principal).toBe(mallory.scope);
      // The victim's key, order and charge are untouched.
      const victimRow = (await keyRowsAnywhere(key)).find((row) => row.scope === victim.scope);
      expect(victimRow).toMatchObject({ state: 'completed', http_status: 200, replay_count: 0 });
      expect(await chargesFor(theirOrderId)).toHaveLength(1);
      result.stored = "own order only (not the victim's)";
      result.followUp = await expectFollowUpSucceeds();
    });
  }
});

describe('hostile bodies', () => {
  rejection({
    name: 'invalid JSON',
    expectedStatus: 400,
    send: ({ key }) => post({ key, body: '{"json": {"items": [ {"sku": ' }),
  });
  rejection({
    name: '1 MB body (padding in an unknown field)',
    expectedStatus: 413,
    expectedCode: 'PAYLOAD_TOO_LARGE',
    send: ({ key, email }) =>
      post({ key, body: JSON.stringify({ json: { ...cart(email), pad: 'x'.repeat(1 << 20) } }) }),
  });
  rejection({
    name: '1 MB body sent chunked (no Content-Length)',
    expectedStatus: 413,
    expectedCode: 'PAYLOAD_TOO_LARGE',
    send: async ({ key, email }) => {
      const bytes = new TextEncoder().encode(
        JSON.stringify({ json: { ...cart(email), pad: 'y'.repeat(1 << 20) } }),
      );
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < bytes.length; offset += 64 * 1024)
            controller.enqueue(bytes.subarray(offset, offset + 64 * 1024));
          controller.close();
        },
      });
      const response = await fetch(`${app.url}${ENDPOINT}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${mallory.token}`,
          'idempotency-key': key,
        },
        body,
        duplex: 'half',
      } as RequestInit);
      const text = await response.text();
      return { status: response.status, header: (name) => response.headers.get(name), text };
    },
  });
  rejection({
    name: 'deeply nested JSON (5 000 levels)',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key, email }) =>
      post({
        key,
        body: `{"json":{"items":${'['.repeat(5_000)}${']'.repeat(5_000)},"email":"${email}","cardToken":"tok_visa"}}`,
      }),
  });
  rejection({
    name: 'empty body',
    expectedStatus: 400,
    send: ({ key }) => post({ key, body: '' }),
  });
  rejection({
    name: 'input null',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key }) => post({ key, body: '{"json":null}' }),
  });
  rejection({
    name: 'quantity as a string',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    input: ({ email }) => ({ ...cart(email), items: [{ sku: SKU, quantity: '1' }] }),
    send: ({ key, email }) => post({ key, input: { ...cart(email), items: [{ sku: SKU, quantity: '1' }] } }),
  });
  rejection({
    name: 'items not an array',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key, email }) => post({ key, input: { ...cart(email), items: { sku: SKU, quantity: 1 } } }),
  });
  rejection({
    name: 'extra nesting (items: [[line]])',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key, email }) => post({ key, input: { ...cart(email), items: [[{ sku: SKU, quantity: 1 }]] } }),
  });
  rejection({
    name: 'superjson meta smuggling (__proto__ path)',
    expectedStatus: 400,
    send: ({ key, email }) =>
      post({
        key,
        body: JSON.stringify({
          json: cart(email),
          meta: { values: { '__proto__.polluted': ['undefined'] } },
        }),
      }),
  });

  const quantities: Array<[string, string]> = [
    ['negative quantity (-1)', '-1'],
    ['zero quantity', '0'],
    ['fractional quantity (1.5)', '1.5'],
    ['huge quantity (1e9)', '1e9'],
    ['huge quantity (2^53)', '9007199254740992'],
    ['quantity 1e400 (Infinity once parsed)', '1e400'],
  ];
  for (const [name, literal] of quantities) {
    rejection({
      name,
      expectedStatus: 400,
      expectedCode: 'BAD_REQUEST',
      send: ({ key, email }) =>
        post({
          key,
          body: `{"json":{"items":[{"sku":"${SKU}","quantity":${literal}}],"email":"${email}","cardToken":"tok_visa"}}`,
        }),
    });
  }
});

describe('hostile strings', () => {
  rejection({
    name: "SQL-looking email ('; drop table orders; --)",
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key }) => post({ key, input: cart("'; drop table orders; --@example.com") }),
  });
  rejection({
    name: 'script-looking email (<script>…)',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key }) => post({ key, input: cart('<script>alert(1)</script>@example.com') }),
  });
  rejection({
    name: 'SQL-looking card token',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key, email }) =>
      post({ key, input: { ...cart(email), cardToken: "tok_visa'; delete from payments; --" } }),
  });
  rejection({
    name: 'NUL byte in the sku',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key, email }) => post({ key, input: cart(email, [{ sku: `${SKU}\u0000`, quantity: 1 }]) }),
  });
  rejection({
    name: 'lone surrogate in the sku (\\ud800)',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key, email }) => post({ key, input: cart(email, [{ sku: `X\ud800${run}`, quantity: 1 }]) }),
  });
  rejection({
    name: 'NUL byte in the email',
    expectedStatus: 400,
    expectedCode: 'BAD_REQUEST',
    send: ({ key, email }) => post({ key, input: cart(`${email}\u0000`) }),
  });

  // An unknown SKU is a deterministic business answer: the contract stores it (422, replayed), no order, no charge.
  const unknownSkus: Array<[string, string]> = [
    ['unknown sku', `NOPE-${run}`],
    ["SQL-looking sku ('; drop table orders; --)", "'; drop table orders; --"],
    ['script-looking sku (<script>…)', '<script>alert(1)</script>'],
  ];
  for (const [name, sku] of unknownSkus) {
    it(`${name} → 422 unknown_product, replayed; no order, no charge`, async () => {
      const key = randomUUID();
      const email = caseEmail(500 + results.length);
      const input = cart(email, [{ sku, quantity: 1 }]);
      const ordersBefore = await db.order.count({ where: { principal: mallory.scope } });
      const sent = await post({ key, input });
      const result: CaseResult = {
        name,
        status: sent.status,
        expected: '422 (stored)',
        code: trpcCodeOf(sent.text) ?? '(no body)',
        stored: '?',
        followUp: '?',
      };
      results.push(result);
      expect(sent.status, sent.text.slice(0, 300)).toBe(422);
      expect(trpcCodeOf(sent.text)).toBe('UNPROCESSABLE_CONTENT');
      expect(sent.header('content-type')).toMatch(/^application\/json/);
      expect(errorMessageOf(sent.text)).toMatch(/There is no product with SKU/);
      expectNoLeak(sent);
      expect(await db.order.count({ where: { email } })).toBe(0);
      expect(await db.order.count({ where: { principal: mallory.scope } })).toBe(ordersBefore);
      expect(await chargesFor(orderIdFor(mallory.scope, key, input))).toEqual([]);
      // The contract's row 2: the deterministic 422 is kept under mallory's own key, and replays.
      expect(await keyRowsAnywhere(key)).toEqual([
        { scope: mallory.scope, state: 'completed', http_status: 422, replay_count: 0 },
      ]);
      const again = await post({ key, input });
      expect(again.status).toBe(422);
      expect(again.header('idempotent-replayed')).toBe('true');
      // The tables are all still there.
      expect(await db.order.count({ where: { id: victimOrderId } })).toBe(1);
      result.stored = 'no order/charge; key = 422 replay';
      result.followUp = await expectFollowUpSucceeds();
    });
  }
});

describe('hostile credentials', () => {
  const unauthorized = (
    name: string,
    auth: () => Promise<Auth> | Auth,
    followUpAuth?: () => Promise<Auth>,
  ) => {
    it(`${name} → 401`, async () => {
      await runRejection({
        name,
        expectedStatus: 401,
        expectedCode: 'UNAUTHORIZED',
        send: async ({ key, email }) => post({ auth: await auth(), key, input: cart(email) }),
        ...(followUpAuth ? { followUpAuth: await followUpAuth() } : {}),
      });
    });
  };
  const validGuest = async (): Promise<Auth> => ({ cookie: await signSession(randomUUID(), sessionSecret) });

  unauthorized(
    'forged session cookie (signed with another secret)',
    async () => ({
      cookie: await signSession(randomUUID(), 'not-the-secret-not-the-secret-not-the-secret'),
    }),
    validGuest,
  );
  unauthorized(
    'forged session cookie (alg: none)',
    () => ({ cookie: unsignedSession(randomUUID()) }),
    validGuest,
  );
  unauthorized(
    'tampered session cookie (payload swapped)',
    async () => {
      const [head, , signature] = (await signSession(randomUUID(), sessionSecret)).split('.');
      const payload = Buffer.from(JSON.stringify({ sub: victim.userId, iss: 'idem' })).toString('base64url');
      return { cookie: `${head}.${payload}.${signature}` };
    },
    validGuest,
  );
  unauthorized(
    'expired session cookie (right secret, exp in the past)',
    async () => ({
      cookie: await signSession(randomUUID(), sessionSecret, {
        expiresAtSeconds: Math.floor(Date.now() / 1000) - 60,
      }),
    }),
    validGuest,
  );
  unauthorized('no session and no token', () => 'none', validGuest);
  unauthorized('malformed bearer token ("Bearer" alone)', () => ({ authorization: 'Bearer' }));
  unauthorized('malformed bearer token (two words)', () => ({
    authorization: `Bearer ${mallory.token} extra`,
  }));
  unauthorized('Basic instead of Bearer', () => ({
    authorization: `Basic ${Buffer.from('a:b').toString('base64')}`,
  }));
  unauthorized('unknown bearer token', () => ({ token: generateApiToken() }));
});

describe('hostile routing', () => {
  rejection({
    name: 'GET on the mutation',
    expectedStatus: 405,
    send: ({ key, email }) =>
      sendFetch(`${app.url}${ENDPOINT}?input=${encodeURIComponent(JSON.stringify({ json: cart(email) }))}`, {
        method: 'GET',
        headers: { authorization: `Bearer ${mallory.token}`, 'idempotency-key': key },
      }),
  });
  rejection({
    name: 'unknown procedure',
    expectedStatus: 404,
    expectedCode: 'NOT_FOUND',
    send: ({ key, email }) => post({ key, input: cart(email), path: '/api/trpc/checkout.refundEverything' }),
  });
  rejection({
    name: 'batch smuggling (two placeOrder in one request)',
    expectedStatus: 400,
    send: ({ key, email }) =>
      post({
        key,
        path: `${ENDPOINT},${PROCEDURE}?batch=1`,
        body: JSON.stringify({ 0: { json: cart(email) }, 1: { json: cart(email) } }),
      }),
  });
});

describe('hostile webhooks', () => {
  function event(id: string) {
    return {
      id,
      object: 'event',
      type: 'charge.succeeded',
      created: Math.floor(Date.now() / 1000),
      data: {
        object: {
          id: `ch_${randomUUID().replaceAll('-', '').slice(0, 24)}`,
          object: 'charge',
          order: victimOrderId,
          amount: 1,
          currency: 'usd',
          status: 'succeeded',
          refunded: false,
        },
      },
    };
  }
  const forged = (name: string, signatureFor: (body: string) => string | null, rawBody?: string) => {
    it(`${name} → 400, nothing in processed_events`, async () => {
      const id = `evt_${randomUUID().replaceAll('-', '')}`;
      const body = rawBody ?? JSON.stringify(event(id));
      const signature = signatureFor(body);
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (signature !== null) headers['idem-signature'] = signature;
      const sent = await sendFetch(`${webhooks.url}/api/webhooks/provider`, { headers, body });
      const result: CaseResult = {
        name,
        status: sent.status,
        expected: '400',
        code: errorMessageOf(sent.text)?.slice(0, 40) ?? '(no body)',
        stored: '?',
        followUp: '?',
      };
      results.push(result);
      expect(sent.status, sent.text).toBe(400);
      expect(errorMessageOf(sent.text)?.length).toBeGreaterThan(10);
      expectNoLeak(sent);
      expect(await db.processedEvent.count({ where: { id } })).toBe(0);
      expect((await db.order.findUniqueOrThrow({ where: { id: victimOrderId } })).status).toBe('paid');
      result.stored = 'no';
      result.followUp = await expectFollowUpSucceeds();
    });
  };
  forged('forged webhook (signed with the wrong secret)', (body) => signWebhook(body, 'whsec_forged'));
  forged('forged webhook (no signature header)', () => null);
  forged('webhook signed with a stale timestamp', (body) =>
    signWebhook(body, webhookSecret, Math.floor(Date.now() / 1000) - 3_600),
  );
  forged(
    'webhook with a valid signature over a non-JSON body',
    (body) => signWebhook(body, webhookSecret),
    'not json',
  );
});

// ------------------------------------------------------------------------------------ keys in flight cap

describe('per-principal cap on keys in flight', () => {
  /** Every charge's answer waits at the provider (after charging) until releaseCharges(): keys stay in flight. */
  async function holdCharges() {
    const response = await fetch(`${provider.url}/__knobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chargeHold: true }),
    });
    expect(response.status).toBe(200);
  }

  async function chargesHeldNow() {
    const response = await fetch(`${provider.url}/__charges/held?atLeast=0`);
    expect(response.status).toBe(200);
    return ((await response.json()) as { held: number }).held;
  }

  async function releaseCharges() {
    expect((await fetch(`${provider.url}/__charges/release`, { method: 'POST' })).status).toBe(200);
  }

  async function expectRefusedStoredNothing(sent: Sent, key: string, input: CartInput) {
    expect(sent.status, sent.text.slice(0, 300)).toBe(429);
    expect(sent.header('retry-after')).toMatch(/^\d+$/);
    expect(trpcCodeOf(sent.text)).toBe('TOO_MANY_REQUESTS');
    expect(errorMessageOf(sent.text)).toMatch(/Too many requests in progress/);
    expectNoLeak(sent);
    expect(await keyRowsAnywhere(key)).toEqual([]);
    expect(await db.order.count({ where: { email: input.email } })).toBe(0);
    expect(await chargesFor(orderIdFor(capper.scope, key, input))).toEqual([]);
  }

  it(`25 keys in flight at once for one principal → ${CAP} run, the 5 past the cap get 429 + Retry-After and store nothing`, async () => {
    await holdCharges();
    const requests = Array.from({ length: 25 }, (_, index) => ({
      key: randomUUID(),
      input: cart(`cap-${run}-${index}@example.com`),
    }));
    // Sent one after another as soon as the previous one is in flight (claimed, or answered), so which ones are
    // past the cap is deterministic; all 25 are open at once.
    const pending: Array<Promise<Sent>> = [];
    for (const [index, request] of requests.entries()) {
      let settled = false;
      const sent = post({ token: capper.token, key: request.key, input: request.input });
      void sent.finally(() => {
        settled = true;
      });
      pending.push(sent);
      const deadline = Date.now() + 30_000;
      // Within the cap: until it is claimed (its charge then waits at the provider). Past it: until refused.
      const inFlight = async () => index < CAP && (await processingKeysOf(capper.scope)) > index;
      while (!settled && !(await inFlight())) {
        if (Date.now() > deadline) throw new Error(`request ${index} neither claimed nor answered`);
        await sleep(10);
      }
    }
    expect(await processingKeysOf(capper.scope)).toBe(CAP);
    await releaseCharges();
    const answers = await Promise.all(pending);
    const statuses = answers.map((answer) => answer.status);
    results.push({
      name: '25 keys in flight (one after another, all open)',
      status: 429,
      expected: `${CAP} × 200, 5 × 429`,
      code: `${statuses.filter((s) => s === 200).length} × 200, ${statuses.filter((s) => s === 429).length} × 429`,
      stored: 'no (for the 429s)',
      followUp: '?',
    });
    expect(statuses).toEqual([...Array<number>(CAP).fill(200), ...Array<number>(5).fill(429)]);
    for (const [index, answer] of answers.entries()) {
      const request = requests[index];
      if (!request || answer.status !== 429) continue;
      await expectRefusedStoredNothing(answer, request.key, request.input);
    }
    expect(await db.order.count({ where: { principal: capper.scope } })).toBe(CAP);

    // Nothing lost: the same caller, a fresh key — and a refused key retried later — both run.
    const fresh = await post({ token: capper.token, input: cart(`cap-${run}-fresh@example.com`) });
    expect(fresh.status).toBe(200);
    const last = requests[24];
    if (!last) throw new Error('unreachable');
    const retried = await post({ token: capper.token, key: last.key, input: last.input });
    expect(retried.status).toBe(200);
    expect(retried.header('idempotent-replayed')).toBeNull();
    const summary = results.at(-1);
    if (summary) summary.followUp = 'ok 200 (+ a refused key retried: 200)';
  });

  it('25 keys of one principal in one burst → never a 5xx, at least the cap runs, every 429 stores nothing', async () => {
    await holdCharges();
    const burst = `${run}b${randomUUID().slice(0, 4)}`;
    const requests = Array.from({ length: 25 }, (_, index) => ({
      key: randomUUID(),
      input: cart(`cap-${burst}-${index}@example.com`),
    }));
    let answered = 0;
    const pending = requests.map((request) =>
      post({ token: capper.token, key: request.key, input: request.input }).finally(() => {
        answered += 1;
      }),
    );
    // Every request is either refused (answered) or charging (held): all 25 were open at once.
    await expect.poll(async () => answered + (await chargesHeldNow()), { timeout: 30_000 }).toBe(25);
    await releaseCharges();
    const answers = await Promise.all(pending);
    const ok = answers.filter((answer) => answer.status === 200).length;
    const refused = answers.filter((answer) => answer.status === 429).length;
    console.log(
      `[hostile input] 25-key burst, one principal, cap ${CAP}: ${ok} × 200, ${refused} × 429 ` +
        '(the cap is checked in the claim statement: simultaneous claims may overshoot it a little)',
    );
    results.push({
      name: '25 keys in flight (one burst)',
      status: refused > 0 ? 429 : 200,
      expected: `≥ ${CAP} × 200, rest 429`,
      code: `${ok} × 200, ${refused} × 429`,
      stored: 'no (for the 429s)',
      followUp: '?',
    });
    expect(ok + refused).toBe(25);
    expect(ok).toBeGreaterThanOrEqual(CAP);
    for (const [index, answer] of answers.entries()) {
      const request = requests[index];
      if (request && answer.status === 429)
        await expectRefusedStoredNothing(answer, request.key, request.input);
    }
    const summary = results.at(-1);
    if (summary) summary.followUp = await expectFollowUpSucceeds({ token: capper.token });
  });
});
