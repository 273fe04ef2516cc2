/**
 * Red team of the reconciler — its batch (oldest first, `batchSize` per run) must not be held by orders it
 * cannot settle. Two kinds stayed at the head of every batch: anomalies (a succeeded charge that does not match
 * the order: left pending for a human) and an order whose answer could not be read (any error but "provider
 * unavailable" ended the whole run). Behind them, the order that only needed its stock back stayed pending.
 * A database of this file's own: the batch is about every pending order there is.
 */
import { createProviderClient, type PaymentProvider, type RefundingPaymentProvider } from '@idem/payments';
import { startProvider } from '@idem/provider';
import { type Logger, reconcilePendingOrders } from '@idem/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrivateDatabase, type PrivateDatabase } from '../../apps/web/test/helpers/private-database.ts';

const quiet: Logger = { info: () => {}, error: () => {} };

let database: PrivateDatabase;
let provider: Awaited<ReturnType<typeof startProvider>>;
let client: RefundingPaymentProvider;

beforeAll(async () => {
  database = await createPrivateDatabase('idem_reconcile_batch');
  provider = await startProvider({ databaseUrl: database.url, port: 0, testKnobs: true });
  client = createProviderClient({ baseUrl: provider.url, secretKey: 'sk_test_idem', timeoutMs: 2_000 });
});
afterAll(async () => {
  await provider?.close();
  await database?.drop();
});

/** A pending order of 2 × a 45.00 lamp, its stock taken, its last attempt `minutesAgo` old. */
async function pendingOrder(sku: string, minutesAgo: number) {
  const { db } = database;
  const product = await db.product.update({ where: { sku }, data: { stock: { decrement: 2 } } });
  const order = await db.order.create({
    data: {
      principal: 'user:batch-test',
      email: 'alice@example.com',
      currency: product.currency,
      totalCents: 2 * product.priceCents,
      items: {
        create: [
          { productId: product.id, sku, name: product.name, quantity: 2, unitPriceCents: product.priceCents },
        ],
      },
    },
  });
  await db.$executeRaw`
    update orders set created_at = now() - make_interval(mins => ${minutesAgo}) where id = ${order.id}::uuid`;
  return order;
}

async function product(stock: number) {
  const sku = `BATCH-${crypto.randomUUID().slice(0, 8)}`;
  await database.db.product.create({
    data: { sku, name: `Lamp ${sku}`, description: 'batch test', priceCents: 4_500, stock },
  });
  return sku;
}

const deps = (via: PaymentProvider = client) => ({
  db: database.db,
  provider: via,
  enqueueFulfilment: async () => {},
  log: quiet,
});

const statusOf = async (id: string) => (await database.db.order.findUniqueOrThrow({ where: { id } })).status;

const anomalyCounter = async () =>
  Number(
    (
      await database.db.operationalCounter.findUnique({
        where: { name_label: { name: 'reconcile_anomalies', label: '' } },
      })
    )?.value ?? 0,
  );

describe('a reconciler batch full of orders it cannot settle', () => {
  it('two anomalies (batch of 2) do not keep a newer abandoned order pending; each anomaly is counted once', async () => {
    const sku = await product(10);
    // Two older orders, each with a 1-cent charge at the provider: anomalies for a human.
    const odd = [await pendingOrder(sku, 30), await pendingOrder(sku, 25)];
    for (const order of odd) {
      const charged = await client.charge({
        amountCents: 1,
        currency: order.currency,
        source: 'tok_visa',
        orderId: order.id,
        idempotencyKey: `odd_${order.id}`,
      });
      expect(charged.outcome).toBe('succeeded');
    }
    const plain = await pendingOrder(sku, 10); // nothing charged: only needs its stock back

    // The batch is full of anomalies: the fault bites on the first run.
    const first = await reconcilePendingOrders(deps(), { batchSize: 2 });
    expect(first.anomalies).toBe(2);
    expect(await statusOf(plain.id)).toBe('pending');

    await reconcilePendingOrders(deps(), { batchSize: 2 });
    await reconcilePendingOrders(deps(), { batchSize: 2 });
    expect(await statusOf(plain.id)).toBe('payment_failed');
    expect((await database.db.product.findUniqueOrThrow({ where: { sku } })).stock).toBe(6);
    for (const order of odd) {
      const flagged = await database.db.order.findUniqueOrThrow({ where: { id: order.id } });
      expect([flagged.status, flagged.reconciledOutcome]).toEqual(['pending', 'anomaly']);
    }
    expect(await anomalyCounter()).toBe(2);

    // Due again after the recheck wait: looked at, still an anomaly, not counted twice.
    const again = await reconcilePendingOrders(deps(), { batchSize: 2, anomalyRecheckSeconds: 0 });
    expect(again.anomalies).toBe(2);
    expect(await anomalyCounter()).toBe(2);
  });

  it('an order whose answer cannot be read fails alone: the rest of the run settles', async () => {
    const sku = await product(10);
    const unreadable = await pendingOrder(sku, 20);
    const plain = await pendingOrder(sku, 10);
    const garbling: PaymentProvider = {
      charge: (request) => client.charge(request),
      async listCharges(orderId) {
        if (orderId === unreadable.id) throw new SyntaxError('Unexpected token < in JSON at position 0');
        return client.listCharges(orderId);
      },
    };
    const summary = await reconcilePendingOrders(deps(garbling));
    expect(summary.failed).toBe(1);
    expect(await statusOf(unreadable.id)).toBe('pending');
    expect(await statusOf(plain.id)).toBe('payment_failed');
  });
});
