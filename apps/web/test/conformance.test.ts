/**
 * The package's conformance kit (`@idem/idempotency/testing`) against this app's real checkout API over HTTP:
 * the Next route handler behind node:http on loopback, a real payment provider process (test knobs on for the
 * slow and failing checks), the run's Postgres. Each check of the kit is one test below.
 *
 * CONTROL: the same kit against the same service behind the same principal procedure WITHOUT the idempotency
 * middleware must fail, concurrency and fingerprint first of all.
 *
 * Everything is scoped to this file: its own product, its own two API users, and an email of its own in every
 * order, which is what `executions()` counts (other test files share the database and run at the same time).
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient, generateApiToken, hashApiToken } from '@idem/db';
import { DEFAULT_OPTIONS } from '@idem/idempotency';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import {
  type ConformanceTarget,
  formatConformanceReport,
  registerIdempotencyConformance,
  runIdempotencyConformance,
} from '@idem/idempotency/testing';
import type { startProvider } from '@idem/provider';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlaceOrderInput } from '~/lib/schemas';
import { type CheckoutServers, startCheckoutServers } from './helpers/checkout-servers.ts';
import type { LoopbackServer } from './helpers/loopback-http.ts';

const run = randomUUID().slice(0, 8).toLowerCase();
const SKU = `CONFORMANCE-${run.toUpperCase()}`;

const db = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? '', max: 4 });
const store = createPrismaIdempotencyStore(db);
let provider: Awaited<ReturnType<typeof startProvider>> | undefined;
let app: LoopbackServer | undefined;
let control: LoopbackServer | undefined;
let servers: CheckoutServers | undefined;
const principals = [
  { token: generateApiToken(), scope: '' },
  { token: generateApiToken(), scope: '' },
];

beforeAll(async () => {
  await db.product.create({
    data: { sku: SKU, name: `Conformance item ${run}`, description: 'test', priceCents: 900, stock: 100_000 },
  });
  for (const [index, principal] of principals.entries()) {
    const user = await db.user.create({
      data: { email: `conformance-${index}-${run}@example.com`, name: `Conformance ${index}` },
    });
    await db.apiToken.create({
      data: { userId: user.id, label: 'conformance test', tokenHash: hashApiToken(principal.token) },
    });
    principal.scope = `user:${user.id}`;
  }

  servers = await startCheckoutServers(process.env.DATABASE_URL ?? '');
  ({ provider, app, control } = servers);
});

afterAll(async () => {
  await servers?.close();
  await db.$disconnect();
});

type ProviderKnobs = { failNext?: number; chargeHold?: boolean };

function providerCall(path: string, method: 'GET' | 'POST') {
  if (!provider) throw new Error('the provider has not started');
  return fetch(`${provider.url}${path}`, { method });
}

async function setKnobs(knobs: ProviderKnobs | null) {
  if (!provider) throw new Error('the provider has not started');
  const response = await fetch(`${provider.url}/__knobs`, {
    method: knobs ? 'POST' : 'DELETE',
    headers: { 'content-type': 'application/json' },
    ...(knobs ? { body: JSON.stringify(knobs) } : {}),
  });
  if (response.status !== 200) throw new Error(`provider knobs: ${response.status} ${await response.text()}`);
}

/** Runs `body` with the provider's knobs set, and resets them afterwards whatever happens. */
async function withKnobs<T>(knobs: ProviderKnobs, body: () => Promise<T>) {
  await setKnobs(knobs);
  try {
    return await body();
  } finally {
    await setKnobs(null);
  }
}

/**
 * The checkout as a conformance target. `email` marks every order this target places, and `executions()`
 * counts exactly those: a declined card and a provider outage leave an order too, which the kit allows for.
 */
function checkoutTarget(baseUrl: () => string, email: string): ConformanceTarget<PlaceOrderInput> {
  const cart = (quantity: number, cardToken = 'tok_visa'): PlaceOrderInput => ({
    items: [{ sku: SKU, quantity }],
    email,
    cardToken,
  });
  return {
    get url() {
      return `${baseUrl()}/api/trpc`;
    },
    procedure: 'checkout.placeOrder',
    input: () => cart(1),
    differentInput: () => cart(2),
    invalidInput: () => ({ items: [], email, cardToken: 'tok_visa' }),
    serialize: superjson.serialize,
    principals: [
      {
        headers: { authorization: `Bearer ${principals[0]?.token}` },
        get scope() {
          return principals[0]?.scope;
        },
      },
      {
        headers: { authorization: `Bearer ${principals[1]?.token}` },
        get scope() {
          return principals[1]?.scope;
        },
      },
    ],
    unauthenticatedHeaders: { authorization: 'Bearer idem_not_a_token_we_issued' },
    executions: () => db.order.count({ where: { email } }),
    businessErrorInput: () => cart(1, 'tok_chargeDeclined'),
    // The provider holds each charge's answer (after charging) until the check releases it: the claim is
    // committed and the request is in flight for as long as the check needs.
    withHeldExecutions: (body) =>
      withKnobs({ chargeHold: true }, () =>
        body({
          reached: async (count) => {
            const held = await providerCall(`/__charges/held?atLeast=${count}&timeoutMs=30000`, 'GET');
            if (held.status !== 200)
              throw new Error(`${count} charge(s) not held at the provider within 30 s`);
          },
          release: async () => {
            const released = await providerCall('/__charges/release', 'POST');
            if (released.status !== 200) throw new Error(`provider release: ${released.status}`);
          },
        }),
      ),
    // The provider's next charge fails with a 500: the app answers 503 and releases the key.
    withTransientFailure: (body) => withKnobs({ failNext: 1 }, body),
    // placeOrder is external mode with the library's default cap.
    inFlightCap: DEFAULT_OPTIONS.maxInFlightPerScope,
    store,
  };
}

function urlOf(server: LoopbackServer | undefined): string {
  if (!server) throw new Error('the server has not started');
  return server.url;
}

registerIdempotencyConformance(
  checkoutTarget(() => urlOf(app), `conformance-${run}@example.com`),
  { describe, it },
  {
    name: 'the checkout (POST /api/trpc/checkout.placeOrder) conforms to the Idempotency-Key contract',
    onResult: (result) =>
      console.log(`[conformance] ${result.id} (${result.durationMs} ms): ${result.detail}`),
  },
);

describe('CONTROL: the same kit against the checkout without the idempotency middleware', () => {
  it('fails: concurrency runs every duplicate, the fingerprint check gets a 200 instead of a 422', async () => {
    // No store: nothing is ever stored there, and the 429 check would wait 10 s for claims that never come.
    const target = checkoutTarget(() => urlOf(control), `conformance-control-${run}@example.com`);
    const report = await runIdempotencyConformance({ ...target, store: undefined });
    console.log(formatConformanceReport(report));
    expect(report.passed).toBe(false);
    const byId = new Map(report.results.map((result) => [result.id, result]));
    expect(byId.get('concurrency')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/expected 1 execution, counted 20 /),
    });
    expect(byId.get('fingerprint')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/expected HTTP 422, got 200/),
    });
    // Without the middleware nothing is ever replayed, and a missing key is not even noticed.
    for (const id of ['replay', 'missing-key', 'in-flight', 'scope'] as const)
      expect(byId.get(id)?.passed, id).toBe(false);
  }, 120_000);
});
