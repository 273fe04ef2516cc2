/**
 * A database left by pg-boss 10 (the real 10.4.2, installed as `pg-boss-v10`), with fulfilment jobs queued,
 * upgraded by starting this package's pg-boss 12: each job is delivered once, and only once, however many
 * processes start. The control: pg-boss 12 started on that schema by itself refuses it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { PgBoss } from 'pg-boss';
import PgBossV10 from 'pg-boss-v10';
import { afterAll, describe, expect, it } from 'vitest';
import { legacySchemaName, Queue, startJobQueue } from '../src/index.ts';

const databaseUrl = (() => {
  const url = process.env.DATABASE_URL;
  if (!url)
    throw new Error('DATABASE_URL is not set: run the tests from the repo root (vitest global setup)');
  return url;
})();

const settings = { expireInSeconds: 30, retryLimit: 3, retryDelaySeconds: 1 };
const schemas: string[] = [];

function freshSchema(): string {
  const schema = `pgboss_up_${randomBytes(5).toString('hex')}`;
  schemas.push(schema, legacySchemaName(schema));
  return schema;
}

afterAll(async () => {
  const boss = new PgBoss({ connectionString: databaseUrl, schema: freshSchema(), supervise: false });
  await boss.start();
  try {
    for (const schema of schemas)
      await boss.getDb().executeSql(`drop schema if exists "${schema}" cascade`, []);
  } finally {
    await boss.stop({ graceful: false });
  }
});

/** What a running pg-boss 10 deployment leaves behind: its schema, its fulfilment queue, jobs waiting. */
async function v10DatabaseWith(schema: string, orderIds: string[]): Promise<string[]> {
  const boss = new PgBossV10({ connectionString: databaseUrl, schema, supervise: false, schedule: false });
  await boss.start();
  try {
    const { retryDelaySeconds, ...rest } = settings;
    await boss.createQueue(Queue.fulfilment, {
      name: Queue.fulfilment,
      policy: 'standard',
      ...rest,
      retryDelay: retryDelaySeconds,
      retryBackoff: true,
    });
    const ids: string[] = [];
    for (const orderId of orderIds) {
      const id = await boss.send(Queue.fulfilment, { orderId });
      if (id === null) throw new Error('pg-boss 10 did not enqueue');
      ids.push(id);
    }
    return ids;
  } finally {
    await boss.stop({ graceful: false, wait: true });
  }
}

async function schemaVersion(boss: PgBoss, schema: string): Promise<number> {
  const { rows } = await boss.getDb().executeSql(`select version from "${schema}".version`);
  return Number(rows[0]?.version);
}

describe('upgrading from pg-boss 10', () => {
  it('control: pg-boss 12 on its own refuses a pg-boss 10 schema', async () => {
    const schema = freshSchema();
    await v10DatabaseWith(schema, [randomUUID()]);
    const plain = new PgBoss({ connectionString: databaseUrl, schema, supervise: false, schedule: false });
    plain.on('error', () => {});
    await expect(plain.start()).rejects.toThrow(/version 24/);
    await plain.stop({ graceful: false }).catch(() => {});
  });

  it('startJobQueue moves the queued jobs over (same ids, same payload, queue settings) and each is delivered once', async () => {
    const schema = freshSchema();
    const orders = [randomUUID(), randomUUID()];
    const ids = await v10DatabaseWith(schema, orders);

    // Two processes start at once on the old database, then a third later: the jobs move exactly once.
    const started = await Promise.all(
      [0, 1].map(() =>
        startJobQueue(databaseUrl, { role: 'worker', schema, fulfilment: settings, onError: () => {} }),
      ),
    );
    const later = await startJobQueue(databaseUrl, {
      role: 'sender',
      schema,
      fulfilment: settings,
      onError: () => {},
    });
    const bosses = [...started, later];
    try {
      const boss = started[0] as PgBoss;
      expect(await schemaVersion(boss, schema)).toBeGreaterThan(24);
      expect(await schemaVersion(boss, legacySchemaName(schema))).toBe(24);

      const moved = await boss.findJobs<{ orderId: string }>(Queue.fulfilment);
      expect(moved.map((job) => job.id).sort()).toEqual([...ids].sort());
      expect(moved.map((job) => job.data.orderId).sort()).toEqual([...orders].sort());
      expect(moved[0]).toMatchObject({ state: 'created', retryLimit: 3, retryDelay: 1, retryBackoff: true });
      const { rows: left } = await boss
        .getDb()
        .executeSql(`select count(*)::int as n from "${legacySchemaName(schema)}".job where name = $1`, [
          Queue.fulfilment,
        ]);
      expect(left[0]?.n).toBe(0);

      // Work them on all three instances: every order is handled once, every job completes.
      const handled: string[] = [];
      for (const instance of bosses)
        await instance.work<{ orderId: string }>(
          Queue.fulfilment,
          { pollingIntervalSeconds: 0.5 },
          async (jobs) => {
            for (const job of jobs) handled.push(job.data.orderId);
          },
        );
      await expect
        .poll(async () => (await boss.findJobs(Queue.fulfilment)).map((job) => job.state), {
          timeout: 20_000,
        })
        .toEqual(['completed', 'completed']);
      expect(handled.sort()).toEqual([...orders].sort());
    } finally {
      await Promise.all(bosses.map((b) => b.stop({ graceful: false })));
    }
  });

  it('a new database is left alone: no old schema, nothing to move', async () => {
    const schema = freshSchema();
    const boss = await startJobQueue(databaseUrl, {
      role: 'worker',
      schema,
      fulfilment: settings,
      onError: () => {},
    });
    try {
      const { rows } = await boss
        .getDb()
        .executeSql('select count(*)::int as n from pg_namespace where nspname = $1', [
          legacySchemaName(schema),
        ]);
      expect(rows[0]?.n).toBe(0);
      expect((await boss.getQueues()).map((q) => q.name)).toContain(Queue.fulfilment);
    } finally {
      await boss.stop({ graceful: false });
    }
  });
});
