/**
 * `idem-conformance` (packages/conformance) against the checkout's real tRPC route, from outside: the command as
 * a user runs it, with the checkout's superjson envelope as the body. The checkout keeps every rule of Idem's
 * contract and of the draft but one: tRPC answers errors in its own JSON envelope, not as problem documents —
 * this test pins that gap, so closing it (or losing any other row) shows here.
 */
import { randomUUID } from 'node:crypto';
import { runConformanceCommand } from '@idem/conformance';
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CheckoutServers, startCheckoutServers } from './helpers/checkout-servers.ts';

const [alice, bob] = demoUsers;
const SKU = `IDEMCLI-${randomUUID().slice(0, 8).toUpperCase()}`;
const db = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? '', max: 2 });
let servers: CheckoutServers | undefined;

beforeAll(async () => {
  await seedDatabase(db);
  await db.product.create({
    data: { sku: SKU, name: 'Black-box item', description: 'test', priceCents: 700, stock: 100_000 },
  });
  servers = await startCheckoutServers(process.env.DATABASE_URL ?? '');
});

afterAll(async () => {
  await servers?.close();
  await db.$disconnect();
});

describe('idem-conformance against the checkout', () => {
  it('passes every check it can run from outside but the problem documents (tRPC error envelopes)', async () => {
    const order = (email: string) =>
      JSON.stringify({ json: { items: [{ sku: SKU, quantity: 1 }], email, cardToken: 'tok_visa' } });
    const { report } = await runConformanceCommand([
      `${servers?.app.url}/api/trpc/checkout.placeOrder`,
      ...['--effect-pointer', '/result/data/json/id', '--profile', 'draft-07', '--json'],
      ...['--body', order('{{uuid}}@example.com'), '--other-body', order('other-{{uuid}}@example.com')],
      ...['--invalid-body', JSON.stringify({ json: { items: [], email: 'x', cardToken: '' } })],
      ...['--business-error-body', order('declined@example.com').replace('tok_visa', 'tok_chargeDeclined')],
      ...[
        '--header',
        `Authorization: Bearer ${alice?.token}`,
        '--other-header',
        `Authorization: Bearer ${bob?.token}`,
      ],
    ]);
    const failed = report?.rows.filter((row) => row.result === 'fail').map((row) => row.id);
    const passed = report?.rows.filter((row) => row.result === 'pass').map((row) => row.id);
    console.log(`[conformance command] checkout: passed ${passed?.join(', ')}; failed ${failed?.join(', ')}`);
    expect(failed?.sort()).toEqual(['docs-link', 'problem-details']);
    expect(passed).toEqual(
      expect.arrayContaining([
        'first-request',
        'replay',
        'fingerprint',
        'concurrency',
        'scope',
        'stored-error',
      ]),
    );
  });
});
