/**
 * The tRPC HTTP contract as curl sees it: the real route handler, real Request/Response objects.
 */
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { startProvider } from '@idem/provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let provider: Awaited<ReturnType<typeof startProvider>>;
let POST: (request: Request) => Promise<Response>;

beforeAll(async () => {
  const databaseUrl = process.env.DATABASE_URL ?? '';
  const db = createPrismaClient({ connectionString: databaseUrl, max: 1 });
  await seedDatabase(db).finally(() => db.$disconnect());
  provider = await startProvider({ databaseUrl, port: 0 });
  // The app reads its environment once, on first import: set it before importing the route.
  process.env.PROVIDER_URL = provider.url;
  ({ POST } = await import('~/app/api/trpc/[trpc]/route'));
});
afterAll(async () => {
  await provider?.close();
});

function placeOrderRequest(body: unknown, headers: Record<string, string>) {
  return new Request('http://localhost/api/trpc/checkout.placeOrder', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

describe('POST /api/trpc/checkout.placeOrder', () => {
  it('places an order for a bearer-token client (the README curl)', async () => {
    const response = await POST(
      placeOrderRequest(
        {
          json: {
            items: [{ sku: 'TOTE-CANVAS', quantity: 1 }],
            email: 'alice@example.com',
            cardToken: 'tok_visa',
          },
        },
        { authorization: `Bearer ${demoUsers[0]?.token}`, 'idempotency-key': crypto.randomUUID() },
      ),
    );
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      result: { data: { json: { status: string; totalCents: number } } };
    };
    expect(body.result.data.json).toMatchObject({ status: 'paid', totalCents: 2400 });
  });

  it('answers 401 for a bad token and 400 for bad input, with a readable message', async () => {
    const unauthorized = await POST(placeOrderRequest({ json: {} }, { authorization: 'Bearer wrong' }));
    expect(unauthorized.status).toBe(401);

    const invalid = await POST(
      placeOrderRequest(
        { json: { items: [], email: 'x', cardToken: 'tok_visa' } },
        { authorization: `Bearer ${demoUsers[0]?.token}`, 'idempotency-key': crypto.randomUUID() },
      ),
    );
    expect(invalid.status).toBe(400);
    const body = (await invalid.json()) as {
      error: { json: { data: { fieldErrors: Record<string, string[]> } } };
    };
    expect(body.error.json.data.fieldErrors).toMatchObject({ items: ['Your cart is empty.'] });
  });

  it('answers 402 for a declined card', async () => {
    const response = await POST(
      placeOrderRequest(
        {
          json: {
            items: [{ sku: 'TOTE-CANVAS', quantity: 1 }],
            email: 'bob@example.com',
            cardToken: 'tok_chargeDeclined',
          },
        },
        { authorization: `Bearer ${demoUsers[1]?.token}`, 'idempotency-key': crypto.randomUUID() },
      ),
    );
    expect(response.status).toBe(402);
    const body = (await response.json()) as {
      error: { json: { message: string; data: { reason: string } } };
    };
    expect(body.error.json).toMatchObject({
      message: 'Your card was declined.',
      data: { reason: 'card_declined' },
    });
  });
});
