/**
 * The database-backed metrics of /api/metrics: key gauges computed at scrape time, and the counters the worker
 * and the webhook receiver persist in the same transaction as their work — cleanup runs and rows removed, job
 * duplicates dropped, webhook duplicates dropped. Exact values on a private database (parallel test files
 * share the main one); each count has its control (work that must NOT be counted).
 */
import { randomUUID } from 'node:crypto';
import { runCleanup } from '@idem/cleanup';
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { fulfilOrder } from '@idem/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  databaseMetricsSnapshot,
  readDatabaseMetrics,
  refreshDatabaseMetrics,
} from '~/server/observability/database-metrics';
import { metrics } from '~/server/observability/metrics';
import { handleProviderEvent } from '~/server/webhooks/handle-provider-event';
import type { ProviderEvent } from '~/server/webhooks/provider-event';
import { createPrivateDatabase, type PrivateDatabase } from './helpers/private-database.ts';

const silent = { info: () => {}, error: () => {} };
let priv: PrivateDatabase;

beforeAll(async () => {
  priv = await createPrivateDatabase('idem_metrics');
  await seedDatabase(priv.db);
});
afterAll(async () => {
  await priv?.drop();
});

/** The value of one series in the Prometheus text after a refresh from the private database. */
async function scrape(): Promise<(series: string) => number | undefined> {
  await refreshDatabaseMetrics(priv.db, 0); // no caching: every scrape here reads the database
  const text = await metrics.registry.metrics();
  return (series) => {
    const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  };
}

async function insertKey(
  state: 'processing' | 'completed',
  lease: 'live' | 'expired' | 'none',
  expired = false,
) {
  await priv.db.$executeRawUnsafe(
    `insert into idempotency_keys (scope, procedure, key, fingerprint, state, lease_owner, locked_until, expires_at)
     values ($1, 'test.metrics', $2, repeat('a', 64), $3,
             case when $4 = 'none' then null else gen_random_uuid() end,
             case $4 when 'live' then now() + interval '1 minute' when 'expired' then now() - interval '1 minute' end,
             case when $5 then now() - interval '1 minute' else now() + interval '1 day' end)`,
    `guest:${randomUUID()}`,
    randomUUID(),
    state,
    lease,
    expired,
  );
}

async function paidOrder() {
  const product = await priv.db.product.findUniqueOrThrow({ where: { sku: 'MUG-STONE' } });
  return priv.db.order.create({
    data: {
      principal: `guest:${randomUUID()}`,
      email: 'metrics@example.com',
      status: 'paid',
      totalCents: product.priceCents,
      items: {
        create: [
          {
            productId: product.id,
            sku: product.sku,
            name: product.name,
            quantity: 1,
            unitPriceCents: product.priceCents,
          },
        ],
      },
    },
  });
}

describe('key gauges (computed at scrape time)', () => {
  it('counts processing keys with a live lease as in flight and those whose lease ended as expired leases', async () => {
    let value = await scrape();
    expect(value('idem_keys_in_flight')).toBe(0);
    expect(value('idem_leases_expired')).toBe(0);

    await insertKey('processing', 'live');
    await insertKey('processing', 'live');
    await insertKey('processing', 'expired');
    // Controls: a completed key is neither, whatever its (absent) lease.
    await insertKey('completed', 'none');

    value = await scrape();
    expect(value('idem_keys_in_flight')).toBe(2);
    expect(value('idem_leases_expired')).toBe(1);
    expect(value('idem_metrics_database_up')).toBe(1);
    await priv.db.$executeRawUnsafe(`delete from idempotency_keys where procedure = 'test.metrics'`);
  });
});

describe('orders past their time (the order invariant, database part)', () => {
  it('counts a pending order 20 min past its charge attempt and a paid one 20 min past its payment; fresh ones and shipped ones are not', async () => {
    const kinds = ['pending_too_long', 'paid_not_shipped'] as const;
    const series = (kind: (typeof kinds)[number]) => `idem_order_invariant_violations{kind="${kind}"}`;
    let value = await scrape();
    for (const kind of kinds) expect(value(series(kind))).toBe(0);

    const agedPending = await paidOrder();
    const agedPaid = await paidOrder();
    const freshPaid = await paidOrder();
    const shipped = await paidOrder();
    await priv.db.$executeRaw`
      update orders set status = 'pending', charge_attempted_at = now() - interval '20 minutes'
       where id = ${agedPending.id}::uuid`;
    await priv.db.$executeRaw`update orders set status = 'shipped' where id = ${shipped.id}::uuid`;
    for (const [order, age] of [
      [agedPaid, '20 minutes'],
      [freshPaid, '1 minute'],
      [shipped, '20 minutes'],
    ] as const)
      await priv.db.$executeRaw`
        insert into payments (id, order_id, provider_charge_id, status, amount_cents, currency, created_at)
        values (gen_random_uuid(), ${order.id}::uuid, ${`ch_${randomUUID()}`}, 'succeeded', ${order.totalCents},
                'usd', now() - ${age}::interval)`;

    value = await scrape();
    expect(value(series('pending_too_long'))).toBe(1);
    expect(value(series('paid_not_shipped'))).toBe(1);
    const { getAdminOverview } = await import('~/server/admin/overview');
    expect((await databaseMetricsSnapshot(priv.db, 0)).ordersPastTheirTime).toEqual({ pending: 1, paid: 1 });
    expect((await getAdminOverview(priv.db)).ordersPastTheirTime).toBe(2);

    // Shipped (its job ran) and decided (the reconciler gave it up): nothing past its time is left.
    await priv.db.$executeRaw`update orders set status = 'shipped' where id = ${agedPaid.id}::uuid`;
    await priv.db.$executeRaw`update orders set status = 'payment_failed' where id = ${agedPending.id}::uuid`;
    value = await scrape();
    for (const kind of kinds) expect(value(series(kind))).toBe(0);
  });
});

describe('cleanup counters (written by the worker)', () => {
  it('counts each finished run and the rows it removed per table; a run with nothing to do adds a run only', async () => {
    let value = await scrape();
    expect(value('idem_cleanup_runs_total')).toBe(0);
    expect(value('idem_cleanup_rows_removed_total{table="idempotency_keys"}')).toBe(0);
    expect(value('idem_cleanup_rows_removed_total{table="processed_events"}')).toBe(0);

    await insertKey('completed', 'none', true);
    await insertKey('completed', 'none', true);
    await insertKey('completed', 'none', true);
    // Control: expired but its lease is live — the cleanup must keep it, and so must not count it.
    await insertKey('processing', 'live', true);
    await priv.db.$executeRawUnsafe(
      `insert into processed_events (id, source, type, processed_at) values
         ($1, 'provider', 'charge.succeeded', now() - interval '100 hours'),
         ($2, 'provider', 'charge.succeeded', now() - interval '100 hours'),
         ($3, 'provider', 'charge.succeeded', now())`,
      `evt_${randomUUID()}`,
      `evt_${randomUUID()}`,
      `evt_${randomUUID()}`,
    );

    const summary = await runCleanup(priv.db, { batchSize: 2, processedEventsRetentionHours: 72 });
    expect(summary.idempotencyKeys.deleted).toBe(3);
    expect(summary.processedEvents.deleted).toBe(2);
    value = await scrape();
    expect(value('idem_cleanup_runs_total')).toBe(1);
    expect(value('idem_cleanup_rows_removed_total{table="idempotency_keys"}')).toBe(3);
    expect(value('idem_cleanup_rows_removed_total{table="processed_events"}')).toBe(2);

    await runCleanup(priv.db, { batchSize: 2 });
    value = await scrape();
    expect(value('idem_cleanup_runs_total')).toBe(2);
    expect(value('idem_cleanup_rows_removed_total{table="idempotency_keys"}')).toBe(3);
    expect(value('idem_cleanup_rows_removed_total{table="processed_events"}')).toBe(2);
    await priv.db.$executeRawUnsafe(`delete from idempotency_keys where procedure = 'test.metrics'`);
  });
});

describe('job duplicates dropped (written by the worker)', () => {
  it('counts a delivery that found the shipment and the receipt already there, not the first one', async () => {
    const series = 'idem_job_duplicates_dropped_total{queue="fulfilment"}';
    expect((await scrape())(series)).toBe(0);
    const order = await paidOrder();

    const first = await fulfilOrder(priv.db, order.id, { log: silent });
    expect(first.shipmentCreated && first.receiptCreated).toBe(true);
    expect((await scrape())(series)).toBe(0); // control: the delivery that did the work

    await fulfilOrder(priv.db, order.id, { log: silent });
    await fulfilOrder(priv.db, order.id, { log: silent });
    expect((await scrape())(series)).toBe(2);

    // Control: a delivery for an order that is not shipped does nothing, and is no duplicate.
    const failed = await priv.db.order.update({
      where: { id: (await paidOrder()).id },
      data: { status: 'payment_failed' },
    });
    await fulfilOrder(priv.db, failed.id, { log: silent });
    expect((await scrape())(series)).toBe(2);
  });
});

describe('webhook duplicates dropped (written by every web process)', () => {
  it('counts a redelivered event id in the same transaction; a new event id is applied and not counted', async () => {
    const series = 'idem_webhook_duplicates_dropped_total{source="provider"}';
    expect((await scrape())(series)).toBe(0);
    const order = await paidOrder();
    const event = (id: string): ProviderEvent => ({
      id,
      object: 'event',
      type: 'charge.refunded',
      created: Math.floor(Date.now() / 1000),
      data: {
        object: {
          id: `ch_${randomUUID().slice(0, 8)}`,
          order: order.id,
          amount: order.totalCents,
          currency: 'usd',
          status: 'succeeded',
          refunded: true,
        },
      },
    });
    const deps = { db: priv.db, enqueueFulfilment: async () => {} };
    const id = `evt_${randomUUID()}`;
    expect(await handleProviderEvent(deps, event(id))).toEqual({ duplicate: false, effect: 'refunded' });
    expect((await scrape())(series)).toBe(0);
    expect(await handleProviderEvent(deps, event(id))).toEqual({ duplicate: true });
    expect(await handleProviderEvent(deps, event(id))).toEqual({ duplicate: true });
    expect((await scrape())(series)).toBe(2);
    // Control: another event id is applied (no change: already refunded), not a duplicate.
    expect(await handleProviderEvent(deps, event(`evt_${randomUUID()}`))).toMatchObject({ duplicate: false });
    expect((await scrape())(series)).toBe(2);
  });
});

describe('scrape without the database', () => {
  it('still answers, with idem_metrics_database_up 0 (control: 1 when the query works)', async () => {
    const broken = createPrismaClient({
      connectionString: priv.url.replace(/\/[^/]+$/, '/idem_no_such_database'),
      max: 1,
    });
    try {
      await refreshDatabaseMetrics(broken, 0);
      expect(await metrics.registry.getSingleMetricAsString('idem_metrics_database_up')).toMatch(/ 0$/m);
      await expect(readDatabaseMetrics(broken)).rejects.toThrow();
    } finally {
      await broken.$disconnect();
    }
    await refreshDatabaseMetrics(priv.db, 0);
    expect(await metrics.registry.getSingleMetricAsString('idem_metrics_database_up')).toMatch(/ 1$/m);
  });

  it('shares one read between scrapes within the max age, and reads again after it', async () => {
    const first = databaseMetricsSnapshot(priv.db, 60_000);
    expect(databaseMetricsSnapshot(priv.db, 60_000)).toBe(first); // concurrent and recent callers share it
    const before = (await first).keysInFlight;
    await insertKey('processing', 'live');
    expect((await databaseMetricsSnapshot(priv.db, 60_000)).keysInFlight).toBe(before); // cached
    expect((await databaseMetricsSnapshot(priv.db, 0)).keysInFlight).toBe(before + 1); // control: fresh read
    await priv.db.$executeRawUnsafe(`delete from idempotency_keys where procedure = 'test.metrics'`);
  });
});

describe('GET /api/metrics', () => {
  it('serves every database-backed metric with its type, from the app database', async () => {
    const { GET } = await import('~/app/api/metrics/route');
    const text = await (await GET()).text();
    for (const [name, type] of [
      ['idem_keys_in_flight', 'gauge'],
      ['idem_leases_expired', 'gauge'],
      ['idem_cleanup_runs_total', 'counter'],
      ['idem_cleanup_rows_removed_total', 'counter'],
      ['idem_webhook_duplicates_dropped_total', 'counter'],
      ['idem_job_duplicates_dropped_total', 'counter'],
      ['idem_metrics_database_up', 'gauge'],
    ]) {
      expect(text).toContain(`# TYPE ${name} ${type}`);
    }
    expect(text).toMatch(/^idem_metrics_database_up 1$/m);
    expect(text).toMatch(/^idem_cleanup_rows_removed_total\{table="idempotency_keys"\} \d+$/m);
  });
});
