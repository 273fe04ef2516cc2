/**
 * The dashboard's outcome counts: counted in memory on the request path, flushed in the background with one
 * upsert into idempotency_stats, summed across processes; and the series the charts draw from them.
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient, type Database } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { startProvider } from '@idem/provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getOutcomeSeries } from '~/server/admin/outcome-series';
import { createOutcomeStatsBuffer, type OutcomeCount } from '~/server/observability/outcome-stats-buffer';
import { createPrivateDatabase, type PrivateDatabase } from './helpers/private-database.ts';

const MINUTE = 60_000;
let priv: PrivateDatabase;
let provider: Awaited<ReturnType<typeof startProvider>>;
// Imported once PROVIDER_URL is set: the app's env is parsed when its first module loads.
let db: Database;
let outcomeStats: typeof import('~/server/observability/outcome-stats').outcomeStats;
let writeOutcomeCounts: typeof import('~/server/observability/outcome-stats').writeOutcomeCounts;

beforeAll(async () => {
  provider = await startProvider({ databaseUrl: process.env.DATABASE_URL ?? '', port: 0 });
  process.env.PROVIDER_URL = provider.url;
  ({ db } = await import('~/server/db'));
  ({ outcomeStats, writeOutcomeCounts } = await import('~/server/observability/outcome-stats'));
  await seedDatabase(db);
  priv = await createPrivateDatabase('idem_stats');
});
afterAll(async () => {
  await provider?.close();
  await priv?.drop();
});

/** Rows of idempotency_stats for one procedure, as { "<bucket ms>/<outcome>": count }. */
async function statsOf(database: Database, procedure: string): Promise<Record<string, number>> {
  const rows = await database.$queryRawUnsafe<Array<{ bucket: Date; outcome: string; count: number }>>(
    'select bucket, outcome, count::int as count from idempotency_stats where procedure = $1',
    procedure,
  );
  return Object.fromEntries(rows.map((row) => [`${row.bucket.getTime()}/${row.outcome}`, row.count]));
}

describe('the outcome stats buffer', () => {
  it('counts per minute in memory and writes nothing until it is flushed', async () => {
    const procedure = `test.stats.${randomUUID()}`;
    let clock = Date.UTC(2026, 10, 30, 12, 0, 10);
    const buffer = createOutcomeStatsBuffer({
      write: (counts) => writeOutcomeCounts(db, counts),
      intervalMs: 3_600_000,
      now: () => clock,
    });
    try {
      buffer.record(procedure, 'executed');
      buffer.record(procedure, 'replayed');
      buffer.record(procedure, 'replayed');
      clock += MINUTE; // the next minute is its own bucket
      buffer.record(procedure, 'replayed');
      expect(buffer.pending).toBe(3);
      expect(await statsOf(db, procedure)).toEqual({}); // nothing written on the request path

      expect(await buffer.flush()).toBe(3);
      const minute = Date.UTC(2026, 10, 30, 12, 0, 0);
      expect(await statsOf(db, procedure)).toEqual({
        [`${minute}/executed`]: 1,
        [`${minute}/replayed`]: 2,
        [`${minute + MINUTE}/replayed`]: 1,
      });
      expect(buffer.pending).toBe(0);
      expect(await buffer.flush()).toBe(0);
    } finally {
      buffer.stop();
    }
  });

  it('sums the counts of several processes (buffers) flushing the same rows at once', async () => {
    const procedure = `test.stats.${randomUUID()}`;
    const clock = Date.UTC(2026, 10, 30, 12, 5, 0);
    const buffers = Array.from({ length: 4 }, () =>
      createOutcomeStatsBuffer({
        write: (counts) => writeOutcomeCounts(db, counts),
        intervalMs: 3_600_000,
        now: () => clock,
      }),
    );
    for (const [index, buffer] of buffers.entries()) {
      for (let i = 0; i <= index; i += 1) buffer.record(procedure, 'executed');
      buffer.record(procedure, 'conflict');
    }
    await Promise.all(buffers.map((buffer) => buffer.flush()));
    expect(await statsOf(db, procedure)).toEqual({ [`${clock}/executed`]: 10, [`${clock}/conflict`]: 4 });
    for (const buffer of buffers) buffer.stop();
  });

  it('keeps the counts when a flush fails and writes them with the next one', async () => {
    const procedure = `test.stats.${randomUUID()}`;
    const clock = Date.UTC(2026, 10, 30, 12, 10, 0);
    const unreachable = createPrismaClient({
      connectionString: priv.url.replace(/\/[^/]+$/, '/idem_no_such_database'),
      max: 1,
    });
    let target: Database = unreachable;
    const buffer = createOutcomeStatsBuffer({
      write: (counts) => writeOutcomeCounts(target, counts),
      intervalMs: 3_600_000,
      now: () => clock,
    });
    try {
      buffer.record(procedure, 'executed');
      await expect(buffer.flush()).rejects.toThrow();
      expect(buffer.pending).toBe(1);
      buffer.record(procedure, 'executed');
      target = db;
      expect(await buffer.flush()).toBe(1);
      expect(await statsOf(db, procedure)).toEqual({ [`${clock}/executed`]: 2 });
    } finally {
      buffer.stop();
      await unreachable.$disconnect();
    }
  });

  it('bounds what it holds while the database is away, dropping the oldest minutes first', async () => {
    let clock = Date.UTC(2026, 10, 30, 13, 0, 0);
    const written: OutcomeCount[][] = [];
    const buffer = createOutcomeStatsBuffer({
      write: async (counts) => {
        written.push(counts);
      },
      intervalMs: 3_600_000,
      maxPending: 3,
      now: () => clock,
    });
    for (let minute = 0; minute < 5; minute += 1) {
      buffer.record('p', 'executed');
      buffer.record('p', 'executed');
      clock += MINUTE;
    }
    expect(buffer.pending).toBe(3);
    expect(buffer.dropped).toBe(4);
    await buffer.flush();
    expect(written[0]?.map((row) => row.bucket.getTime())).toEqual([
      Date.UTC(2026, 10, 30, 13, 2),
      Date.UTC(2026, 10, 30, 13, 3),
      Date.UTC(2026, 10, 30, 13, 4),
    ]);
    buffer.stop();
  });
});

describe('the request path', () => {
  it('a real idempotent request is counted in memory, and reaches idempotency_stats only when flushed', async () => {
    const { POST } = await import('~/app/api/trpc/[trpc]/route');
    await outcomeStats.flush();
    const send = (key: string) =>
      POST(
        new Request('http://localhost/api/trpc/checkout.placeOrder', {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${demoUsers[0]?.token}`,
            'idempotency-key': key,
          },
          body: JSON.stringify({
            json: {
              items: [{ sku: 'TOTE-CANVAS', quantity: 1 }],
              email: 'alice@example.com',
              cardToken: 'tok_visa',
            },
          }),
        }),
      );
    const key = randomUUID();
    expect((await send(key)).status).toBe(200);
    expect((await send(key)).status).toBe(200);
    // Both outcomes wait in this process's buffer (other test files run in other processes, with their own).
    expect(outcomeStats.pending).toBeGreaterThanOrEqual(2);
    const before = await statsOf(db, 'checkout.placeOrder');
    expect(await outcomeStats.flush()).toBeGreaterThanOrEqual(2);
    const after = await statsOf(db, 'checkout.placeOrder');
    const added = (outcome: string) =>
      Object.entries(after)
        .filter(([id]) => id.endsWith(`/${outcome}`))
        .reduce((sum, [id, count]) => sum + count - (before[id] ?? 0), 0);
    expect(added('executed')).toBeGreaterThanOrEqual(1);
    expect(added('replayed')).toBeGreaterThanOrEqual(1);
  });
});

describe('the series the dashboard draws', () => {
  it('buckets the counts per step, fills empty buckets with zeros, and keeps a running total of duplicates', async () => {
    const now = Date.UTC(2026, 10, 30, 12, 59, 30);
    const at = (hh: number, mm: number) => new Date(Date.UTC(2026, 10, 30, hh, mm));
    await writeOutcomeCounts(priv.db, [
      // Before the window: only the duplicates count, into the running total's starting point.
      { bucket: at(11, 0), procedure: 'checkout.placeOrder', outcome: 'replayed', count: 5 },
      { bucket: at(11, 0), procedure: 'checkout.placeOrder', outcome: 'executed', count: 50 },
      { bucket: at(12, 0), procedure: 'checkout.placeOrder', outcome: 'executed', count: 3 },
      { bucket: at(12, 0), procedure: 'checkout.placeOrder', outcome: 'conflict', count: 2 },
      { bucket: at(12, 30), procedure: 'checkout.placeOrder', outcome: 'replayed', count: 4 },
      { bucket: at(12, 30), procedure: 'other.mutation', outcome: 'mismatch', count: 1 },
      { bucket: at(12, 59), procedure: 'other.mutation', outcome: 'replayed', count: 1 },
    ]);

    const hour = await getOutcomeSeries(priv.db, '1h', now);
    expect(hour.stepSeconds).toBe(60);
    expect(hour.procedures.map((entry) => entry.procedure)).toEqual([
      'checkout.placeOrder',
      'other.mutation',
    ]);
    const checkout = hour.procedures[0];
    expect(checkout?.points).toHaveLength(60);
    expect(checkout?.points[0]?.t).toBe(at(12, 0).getTime());
    expect(checkout?.points[0]).toMatchObject({ executed: 3, conflict: 2, replayed: 0 });
    expect(checkout?.points[1]).toMatchObject({ executed: 0, conflict: 0, replayed: 0 });
    expect(checkout?.totals).toMatchObject({ executed: 3, conflict: 2, replayed: 4 });
    expect(hour.duplicatesPrevented[0]).toEqual({ t: at(12, 0).getTime(), inBucket: 2, runningTotal: 7 });
    expect(hour.duplicatesPrevented.at(-1)?.runningTotal).toBe(5 + 2 + 4 + 1);
    expect(hour.duplicatesPreventedTotal).toBe(12);

    const day = await getOutcomeSeries(priv.db, '24h', now);
    expect(day.stepSeconds).toBe(900);
    const dayCheckout = day.procedures.find((entry) => entry.procedure === 'checkout.placeOrder');
    const elevenOclock = dayCheckout?.points.find((point) => point.t === at(11, 0).getTime());
    expect(elevenOclock).toMatchObject({ executed: 50, replayed: 5 });
    expect(day.duplicatesPreventedTotal).toBe(12);
  });
});
