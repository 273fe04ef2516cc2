/**
 * Issue 27: a webhook the provider gives up on is visible — on the metrics (`idem_webhook_deliveries_given_up`)
 * and on the admin dashboard — read through the provider's API as a shop reads Stripe's
 * (`GET /v1/events?delivery_success=false`). A real provider on a private database, whose webhook endpoint
 * refuses every connection (127.0.0.1:9): each delivery fails, and one brought to its last attempt is given up by
 * the provider's own dispatcher.
 */
import { DEFAULT_SECRET_KEY, startProvider } from '@idem/provider';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createProviderReader } from '~/server/admin/provider-reader';
import { metrics } from '~/server/observability/metrics';
import { createPrivateDatabase, type PrivateDatabase } from './helpers/private-database.ts';

let privateDb: PrivateDatabase;
let provider: Awaited<ReturnType<typeof startProvider>>;

beforeAll(async () => {
  privateDb = await createPrivateDatabase('given_up');
  provider = await startProvider({
    databaseUrl: privateDb.url,
    port: 0,
    webhookUrl: 'http://127.0.0.1:9/hooks',
    log: () => {},
  });
});
afterAll(async () => {
  await provider?.close();
  await privateDb?.drop();
});

/** A new reader each time: the snapshots are cached per reader for 10 s. */
const reader = (baseUrl = provider.url) => createProviderReader({ baseUrl, secretKey: DEFAULT_SECRET_KEY });

async function charge(order: string): Promise<string> {
  const response = await fetch(`${provider.url}/v1/charges`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${DEFAULT_SECRET_KEY}`,
      'content-type': 'application/json',
      'idempotency-key': `order_${order}`,
    },
    body: JSON.stringify({ amount: 2000, currency: 'usd', source: 'tok_visa', order }),
  });
  const body = (await response.json()) as { id: string };
  return body.id;
}

const deliveryOf = async (chargeId: string) => (await reader().listEvents(chargeId))[0]?.delivery;

/** Makes the delivery's next attempt its tenth and last, due now; the provider's dispatcher then gives it up. */
async function giveUp(chargeId: string) {
  await expect.poll(async () => (await deliveryOf(chargeId))?.attempts ?? 0).toBeGreaterThan(0);
  await privateDb.db.$executeRawUnsafe(
    `UPDATE provider.webhook_deliveries d SET attempts = 9, next_attempt_at = now()
       FROM provider.events e WHERE e.id = d.event_id AND e.charge_id = $1`,
    chargeId,
  );
  await expect.poll(async () => (await deliveryOf(chargeId))?.failed_at ?? null).not.toBeNull();
}

async function gauge(name: string): Promise<number | undefined> {
  const values = (await metrics.registry.getSingleMetric(name)?.get())?.values;
  return values?.[0]?.value;
}

it('counts the webhooks given up in the last 24 h: not those still being retried, nor older ones', async () => {
  const { readGivenUpDeliveries, refreshProviderMetrics } = await import(
    '~/server/observability/provider-metrics'
  );
  const { getAdminOverview } = await import('~/server/admin/overview');

  const [givenUp, retrying, givenUpLongAgo] = [
    await charge('given-up'),
    await charge('retrying'),
    await charge('long-ago'),
  ];
  await giveUp(givenUp);
  await giveUp(givenUpLongAgo);
  await privateDb.db.$executeRawUnsafe(
    `UPDATE provider.events SET created_at = now() - interval '2 days' WHERE charge_id = $1`,
    givenUpLongAgo,
  );
  // Still retrying: its first attempt failed, it has attempts left.
  expect(await deliveryOf(retrying)).toMatchObject({ failed_at: null, delivered_at: null });

  expect(await readGivenUpDeliveries(reader())).toEqual({ count: 1, atLeast: false });
  // Control of the window: two days later, the one given up "now" is out of it too.
  expect(await readGivenUpDeliveries(reader(), new Date(Date.now() + 2 * 86_400_000))).toEqual({
    count: 0,
    atLeast: false,
  });

  await refreshProviderMetrics(reader());
  expect(await gauge('idem_webhook_deliveries_given_up')).toBe(1);
  expect(await gauge('idem_metrics_provider_up')).toBe(1);
  const overview = await getAdminOverview(privateDb.db, reader());
  expect(overview.webhookDeliveriesGivenUp).toEqual({ count: 1, atLeast: false });
});

it('an unreachable provider is said as such: provider_up 0, the gauge keeps its value, the dashboard shows null', async () => {
  const { refreshProviderMetrics } = await import('~/server/observability/provider-metrics');
  const { getAdminOverview } = await import('~/server/admin/overview');
  metrics.webhookDeliveriesGivenUp.set(7);
  const unreachable = reader('http://127.0.0.1:9');
  await refreshProviderMetrics(unreachable);
  expect(await gauge('idem_metrics_provider_up')).toBe(0);
  expect(await gauge('idem_webhook_deliveries_given_up')).toBe(7);
  expect((await getAdminOverview(privateDb.db, unreachable)).webhookDeliveriesGivenUp).toBeNull();
});
