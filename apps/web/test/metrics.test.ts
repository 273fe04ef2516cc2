/**
 * GET /api/metrics after real requests through the tRPC route: the idempotency layer's outcomes are counted
 * per procedure (executed, replayed, rejected) and their latencies observed.
 */
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { startProvider } from '@idem/provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let provider: Awaited<ReturnType<typeof startProvider>>;
let POST: (request: Request) => Promise<Response>;
let GET: () => Promise<Response>;

beforeAll(async () => {
  const databaseUrl = process.env.DATABASE_URL ?? '';
  const db = createPrismaClient({ connectionString: databaseUrl, max: 1 });
  await seedDatabase(db).finally(() => db.$disconnect());
  provider = await startProvider({ databaseUrl, port: 0 });
  process.env.PROVIDER_URL = provider.url;
  ({ POST } = await import('~/app/api/trpc/[trpc]/route'));
  ({ GET } = await import('~/app/api/metrics/route'));
});
afterAll(async () => {
  await provider?.close();
});

function placeOrder(key: string | null) {
  return POST(
    new Request('http://localhost/api/trpc/checkout.placeOrder', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${demoUsers[0]?.token}`,
        ...(key ? { 'idempotency-key': key } : {}),
      },
      body: JSON.stringify({
        json: {
          items: [{ sku: 'PLANT-POT', quantity: 1 }],
          email: 'alice@example.com',
          cardToken: 'tok_visa',
        },
      }),
    }),
  );
}

async function counter(outcome: string): Promise<number> {
  const text = await (await GET()).text();
  const line = text
    .split('\n')
    .find((candidate) =>
      candidate.startsWith(`idem_requests_total{procedure="checkout.placeOrder",outcome="${outcome}"}`),
    );
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('GET /api/metrics', () => {
  it('serves Prometheus text with the idempotency outcomes and a latency histogram', async () => {
    const before = {
      executed: await counter('executed'),
      replayed: await counter('replayed'),
      rejected: await counter('rejected'),
    };
    const key = crypto.randomUUID();
    expect((await placeOrder(key)).status).toBe(200);
    expect((await placeOrder(key)).status).toBe(200);
    expect((await placeOrder(null)).status).toBe(400);

    const response = await GET();
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(text).toContain('# TYPE idem_requests_total counter');
    expect(text).toContain('# TYPE idem_request_duration_seconds histogram');
    expect(text).toMatch(
      /idem_request_duration_seconds_count\{procedure="checkout\.placeOrder",outcome="executed"\} \d+/,
    );
    expect(await counter('executed')).toBe(before.executed + 1);
    expect(await counter('replayed')).toBe(before.replayed + 1);
    expect(await counter('rejected')).toBe(before.rejected + 1);
    // The raw key never appears in the metrics.
    expect(text).not.toContain(key);
  });
});
