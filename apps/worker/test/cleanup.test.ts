/**
 * Cleanup: expired idempotency keys (never one with a live lease) and processed events past the retention.
 * These tests run cleanup on PRIVATE copies of the tables (`create table … (like … including all)` in a schema of
 * their own, first in the client's search_path; `operational_counters` stays the shared one): a cleanup of the
 * real, shared tables would delete rows that other test files age on purpose (the idempotency store's takeover
 * test expires a key and then expects to take it over). The copies also make the counts exact.
 */
import { randomUUID } from 'node:crypto';
import { formatCleanupSummary, runCleanup } from '@idem/cleanup';
import { createPrismaClient, type Database } from '@idem/db';
import { type PgBoss, Queue, startJobQueue } from '@idem/jobs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startWorker } from '../src/index.ts';
import { collectingLogger, createTestDb, databaseUrl, dropSchema, uniqueName, waitFor } from './helpers.ts';

let db: Database;
const cleanupLater: Array<() => Promise<void>> = [];

beforeAll(() => {
  db = createTestDb();
});
afterEach(async () => {
  for (const cleanup of cleanupLater.splice(0)) await cleanup();
});
afterAll(async () => {
  await db.$disconnect();
});

/**
 * A schema holding private copies of the three tables the cleanup deletes from, and a client that sees them in
 * place of the shared ones (its search_path: that schema, then public).
 */
async function privateTables() {
  const schema = uniqueName('t_cleanup');
  await db.$executeRawUnsafe(`create schema "${schema}"`);
  for (const table of ['idempotency_keys', 'processed_events', 'idempotency_stats', 'idempotency_outbox'])
    await db.$executeRawUnsafe(`create table "${schema}"."${table}" (like public."${table}" including all)`);
  const options = encodeURIComponent(`-c search_path=${schema},public`);
  const privateDb = createPrismaClient({
    connectionString: `${databaseUrl}${databaseUrl.includes('?') ? '&' : '?'}options=${options}`,
    max: 4,
  });
  cleanupLater.push(async () => {
    await privateDb.$disconnect();
    await dropSchema(db, schema);
  });
  return {
    db: privateDb,
    idempotencyKeysTable: `"${schema}".idempotency_keys`,
    processedEventsTable: `"${schema}".processed_events`,
    outcomeStatsTable: `"${schema}".idempotency_stats`,
    outboxTable: `"${schema}".idempotency_outbox`,
  };
}

type Tables = Awaited<ReturnType<typeof privateTables>>;

const keyShapes = {
  // completed, past its retention → deleted
  expiredCompleted: `'completed', null, null, now() - interval '1 second'`,
  // processing, past retention, lease over (its owner died) → deleted
  expiredDeadLease: `'processing', gen_random_uuid(), now() - interval '1 minute', now() - interval '1 second'`,
  // processing, past retention, lease LIVE (a request still running) → kept
  expiredLiveLease: `'processing', gen_random_uuid(), now() + interval '1 minute', now() - interval '1 second'`,
  // within retention → kept
  liveCompleted: `'completed', null, null, now() + interval '1 day'`,
  liveProcessing: `'processing', gen_random_uuid(), now() + interval '30 seconds', now() + interval '1 day'`,
} as const;

function seedKeys(
  tables: Tables,
  shape: keyof typeof keyShapes,
  count: number,
  scope = `scope-${randomUUID()}`,
) {
  return db.$executeRawUnsafe(
    `insert into ${tables.idempotencyKeysTable}
       (scope, procedure, key, fingerprint, state, lease_owner, locked_until, expires_at)
     select $1, '${shape}', i::text, repeat('a', 64), ${keyShapes[shape]} from generate_series(1, ${count}) i`,
    scope,
  );
}

function seedEvents(tables: Tables, ageHours: number, count: number) {
  return db.$executeRawUnsafe(
    `insert into ${tables.processedEventsTable} (id, source, type, processed_at)
     select 'evt_' || md5(random()::text) || '_' || i, 'provider', 'charge.succeeded',
            now() - make_interval(hours => $1) from generate_series(1, ${count}) i`,
    ageHours,
  );
}

async function keyCounts(tables: Tables): Promise<Record<string, number>> {
  const rows = await db.$queryRawUnsafe<Array<{ procedure: string; n: number }>>(
    `select procedure, count(*)::int as n from ${tables.idempotencyKeysTable} group by procedure`,
  );
  return Object.fromEntries(rows.map((row) => [row.procedure, row.n]));
}

async function eventAges(tables: Tables): Promise<number[]> {
  const rows = await db.$queryRawUnsafe<Array<{ hours: number }>>(
    `select round(extract(epoch from now() - processed_at) / 3600)::int as hours
     from ${tables.processedEventsTable} order by 1`,
  );
  return rows.map((row) => row.hours);
}

describe('runCleanup', () => {
  it('deletes exactly the expired keys (never a live lease) and the events older than the retention', async () => {
    const tables = await privateTables();
    await seedKeys(tables, 'expiredCompleted', 4);
    await seedKeys(tables, 'expiredDeadLease', 3);
    await seedKeys(tables, 'expiredLiveLease', 2);
    await seedKeys(tables, 'liveCompleted', 5);
    await seedKeys(tables, 'liveProcessing', 1);
    await seedEvents(tables, 100, 3);
    await seedEvents(tables, 73, 2);
    await seedEvents(tables, 71, 2); // inside the 72 h window: a provider retry may still come
    await seedEvents(tables, 1, 4);

    const summary = await runCleanup(tables.db, { batchSize: 3 });

    expect(summary.idempotencyKeys).toEqual({ deleted: 7, batches: 3 });
    expect(summary.processedEvents).toEqual({ deleted: 5, batches: 2 });
    expect(await keyCounts(tables)).toEqual({ expiredLiveLease: 2, liveCompleted: 5, liveProcessing: 1 });
    expect(await eventAges(tables)).toEqual([1, 1, 1, 1, 71, 71]);
    expect(formatCleanupSummary(summary)).toMatch(
      /^cleanup: deleted 7 expired idempotency keys \(3 batch\(es\)\) and 5 processed events older than 72 h \(2 batch\(es\)\) and 0 sent outbox messages older than that and 0 old outcome-stat rows in \d+\.\d\d s$/,
    );

    // Nothing left to do: a second run deletes nothing.
    const again = await runCleanup(tables.db, { batchSize: 3 });
    expect([again.idempotencyKeys.deleted, again.processedEvents.deleted]).toEqual([0, 0]);
  });

  it('deletes per-minute outcome stats older than their retention (30 days), keeps the recent ones', async () => {
    const tables = await privateTables();
    await db.$executeRawUnsafe(
      `insert into ${tables.outcomeStatsTable} (bucket, procedure, outcome, count)
       values (date_trunc('minute', now() - interval '31 days'), 'checkout.placeOrder', 'executed', 3),
              (date_trunc('minute', now() - interval '29 days'), 'checkout.placeOrder', 'executed', 2),
              (date_trunc('minute', now()), 'checkout.placeOrder', 'replayed', 1)`,
    );
    const summary = await runCleanup(tables.db);
    expect(summary.outcomeStats).toBe(1);
    const [left] = await db.$queryRawUnsafe<Array<{ n: number }>>(
      `select count(*)::int as n from ${tables.outcomeStatsTable}`,
    );
    expect(left?.n).toBe(2);
    expect(formatCleanupSummary(summary)).toContain('1 old outcome-stat rows');
  });

  it('deletes outbox messages sent longer ago than the retention; keeps recent and unsent ones', async () => {
    const tables = await privateTables();
    await db.$executeRawUnsafe(
      `insert into ${tables.outboxTable} (id, type, destination, body, sent_at)
       select 'm-' || n, 'fulfilment', 'fulfilment', '{}', case
         when n <= 5 then now() - interval '73 hours'   -- sent before the retention → deleted
         when n <= 7 then now() - interval '71 hours'   -- sent within it → kept
         else null end                                   -- never sent (the broker away) → kept, however old
       from generate_series(1, 9) as n`,
    );
    await db.$executeRawUnsafe(`update ${tables.outboxTable} set created_at = now() - interval '100 hours'`);
    const summary = await runCleanup(tables.db, { batchSize: 2 });
    expect(summary.sentMessages).toBe(5);
    const left = await db.$queryRawUnsafe<Array<{ id: string }>>(
      `select id from ${tables.outboxTable} order by id`,
    );
    expect(left.map((row) => row.id)).toEqual(['m-6', 'm-7', 'm-8', 'm-9']);
    expect(formatCleanupSummary(summary)).toContain('5 sent outbox messages older than that');
  });

  it('honours the retention: 24 h deletes the 71 h old events too', async () => {
    const tables = await privateTables();
    await seedEvents(tables, 71, 2);
    await seedEvents(tables, 1, 1);
    const summary = await runCleanup(tables.db, { processedEventsRetentionHours: 24 });
    expect(summary.processedEvents.deleted).toBe(2);
    expect(await eventAges(tables)).toEqual([1]);
  });

  it('two cleanups at once: no error, every expired row deleted once, counts add up', async () => {
    const tables = await privateTables();
    await seedKeys(tables, 'expiredCompleted', 600);
    await seedKeys(tables, 'expiredLiveLease', 25);
    await seedKeys(tables, 'liveCompleted', 25);
    await seedEvents(tables, 80, 500);
    await seedEvents(tables, 2, 30);

    const [a, b] = await Promise.all([
      runCleanup(tables.db, { batchSize: 40 }),
      runCleanup(tables.db, { batchSize: 40 }),
    ]);

    expect(a.idempotencyKeys.deleted + b.idempotencyKeys.deleted).toBe(600);
    expect(a.processedEvents.deleted + b.processedEvents.deleted).toBe(500);
    expect(await keyCounts(tables)).toEqual({ expiredLiveLease: 25, liveCompleted: 25 });
    expect((await eventAges(tables)).length).toBe(30);
  });

  it('rejects a batch size that is not a positive integer', async () => {
    const tables = await privateTables();
    await expect(runCleanup(tables.db, { batchSize: 0 })).rejects.toThrow(RangeError);
  });
});

describe('the cleanup job (in-process worker, private pg-boss schema)', () => {
  const schema = uniqueName('pgboss_wc');
  const log = collectingLogger();
  let sender: PgBoss;
  let stopWorker: (() => Promise<void>) | undefined;

  afterAll(async () => {
    await sender?.stop({ graceful: false });
    await stopWorker?.();
    await dropSchema(db, schema);
  });

  it('a cleanup job runs runCleanup and logs one line with both counts', async () => {
    const tables = await privateTables();
    await seedKeys(tables, 'expiredCompleted', 2);
    await seedEvents(tables, 96, 3);
    const worker = await startWorker({
      databaseUrl,
      db: tables.db,
      schema,
      cleanupCron: null,
      pollingIntervalSeconds: 0.5,
      log,
    });
    stopWorker = () => worker.stop({ graceSeconds: 1 });
    sender = await startJobQueue(databaseUrl, { role: 'sender', schema });

    await sender.send(Queue.cleanup, {});
    const line = await waitFor('the cleanup log line', async () =>
      log.lines.find((l) => l.startsWith('cleanup: deleted')),
    );
    expect(line).toMatch(
      /^cleanup: deleted 2 expired idempotency keys .* and 3 processed events older than 72 h/,
    );
    // Stopped here: its client (on the private tables) goes with this test.
    await worker.stop({ graceSeconds: 1 });
    stopWorker = undefined;
  });

  it('the schedule is registered with the cron (UTC) and removed with null', async () => {
    const schedules = async () => (await sender.getSchedules()).filter((s) => s.name === Queue.cleanup);
    const worker = await startWorker({ databaseUrl, db, schema, cleanupCron: '*/7 * * * *', log });
    expect(await schedules()).toMatchObject([{ name: Queue.cleanup, cron: '*/7 * * * *' }]);
    await worker.stop({ graceSeconds: 1 });

    const off = await startWorker({ databaseUrl, db, schema, cleanupCron: null, log });
    expect(await schedules()).toEqual([]);
    await off.stop({ graceSeconds: 1 });

    await expect(startWorker({ databaseUrl, db, schema, cleanupCron: 'every tuesday', log })).rejects.toThrow(
      /IDEM_CLEANUP_CRON "every tuesday" cannot be scheduled/,
    );
  });
});
