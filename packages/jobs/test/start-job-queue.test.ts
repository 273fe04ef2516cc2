/**
 * startJobQueue against the suite's database, each test on a fresh pg-boss schema of its own (dropped after):
 * queue creation, roles, settings, and several processes starting at once.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { PgBoss } from 'pg-boss';
import { afterAll, describe, expect, it } from 'vitest';
import { enqueueFulfilment, Queue, startJobQueue } from '../src/index.ts';

const databaseUrl = (() => {
  const url = process.env.DATABASE_URL;
  if (!url)
    throw new Error('DATABASE_URL is not set: run the tests from the repo root (vitest global setup)');
  return url;
})();

const settings = { expireInSeconds: 30, retryLimit: 10, retryDelaySeconds: 2 };
const schemas: string[] = [];
const errors: string[] = [];
const onError = (message: string) => errors.push(message);

function freshSchema(): string {
  const schema = `pgboss_jt_${randomBytes(5).toString('hex')}`;
  schemas.push(schema);
  return schema;
}

afterAll(async () => {
  const boss = await startJobQueue(databaseUrl, {
    role: 'sender',
    schema: freshSchema(),
    fulfilment: settings,
  });
  try {
    for (const schema of schemas)
      await boss.getDb().executeSql(`drop schema if exists "${schema}" cascade`, []);
  } finally {
    await boss.stop({ graceful: false });
  }
});

async function queues(boss: PgBoss) {
  return Object.fromEntries(
    (await boss.getQueues()).map((q) => [
      q.name,
      { policy: q.policy, expire: q.expireInSeconds, retryLimit: q.retryLimit, retryDelay: q.retryDelay },
    ]),
  );
}

describe('startJobQueue', () => {
  it('a sender creates every queue, but neither schedules nor maintains (no cron queue)', async () => {
    const boss = await startJobQueue(databaseUrl, {
      role: 'sender',
      schema: freshSchema(),
      fulfilment: settings,
      onError,
    });
    try {
      expect(await queues(boss)).toEqual({
        [Queue.fulfilment]: { policy: 'standard', expire: 30, retryLimit: 10, retryDelay: 2 },
        [Queue.cleanup]: { policy: 'standard', expire: 600, retryLimit: 2, retryDelay: 30 },
        [Queue.reconcile]: { policy: 'standard', expire: 300, retryLimit: 2, retryDelay: 30 },
      });
    } finally {
      await boss.stop({ graceful: false });
    }
  });

  it('a worker has pg-boss’s cron queue, and owns the settings; a sender never changes them', async () => {
    const schema = freshSchema();
    const first = await startJobQueue(databaseUrl, { role: 'sender', schema, fulfilment: settings, onError });
    const worker = await startJobQueue(databaseUrl, {
      role: 'worker',
      schema,
      fulfilment: { expireInSeconds: 5, retryLimit: 3, retryDelaySeconds: 1 },
      onError,
    });
    const later = await startJobQueue(databaseUrl, { role: 'sender', schema, fulfilment: settings, onError });
    try {
      const all = await queues(later);
      expect(all[Queue.fulfilment]).toEqual({ policy: 'standard', expire: 5, retryLimit: 3, retryDelay: 1 });
      expect(Object.keys(all)).toContain('__pgboss__send-it');

      // A job takes its expiry and retries from the queue: the sender passes none.
      const id = await enqueueFulfilment(later, randomUUID());
      const [job] = await later.findJobs(Queue.fulfilment, { id });
      expect(job).toMatchObject({
        retryLimit: 3,
        retryDelay: 1,
        retryBackoff: true,
        expireInSeconds: 5,
        state: 'created',
      });
    } finally {
      await Promise.all([first, worker, later].map((boss) => boss.stop({ graceful: false })));
    }
  });

  it('six instances starting at once on an empty schema all succeed', async () => {
    const schema = freshSchema();
    const started = performance.now();
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        startJobQueue(databaseUrl, {
          role: i % 2 ? 'sender' : 'worker',
          schema,
          fulfilment: settings,
          onError,
        }),
      ),
    );
    const ms = performance.now() - started;
    const bosses = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    try {
      expect(results.map((r) => (r.status === 'fulfilled' ? 'ok' : String(r.reason)))).toEqual(
        Array(6).fill('ok'),
      );
      const names = Object.keys(await queues(bosses[0] as PgBoss)).sort();
      expect(names).toEqual(['__pgboss__send-it', Queue.fulfilment, Queue.cleanup, Queue.reconcile].sort());
      console.log(`[jobs] 6 concurrent startJobQueue on an empty schema: all started in ${ms.toFixed(0)} ms`);
    } finally {
      await Promise.all(bosses.map((boss) => boss.stop({ graceful: false })));
    }
  });

  it('starting again on an existing schema is a no-op', async () => {
    const schema = freshSchema();
    const a = await startJobQueue(databaseUrl, { role: 'worker', schema, fulfilment: settings, onError });
    await a.stop({ graceful: false });
    const b = await startJobQueue(databaseUrl, { role: 'worker', schema, fulfilment: settings, onError });
    try {
      expect(Object.keys(await queues(b))).toHaveLength(4);
    } finally {
      await b.stop({ graceful: false });
    }
  });

  it('a worker refuses a queue made with another policy (pg-boss cannot change it in place)', async () => {
    const schema = freshSchema();
    const other = new PgBoss({ connectionString: databaseUrl, schema, supervise: false, schedule: false });
    await other.start();
    try {
      // singleton: one active job per key at a time; keyless jobs would all share the key ''.
      await other.createQueue(Queue.fulfilment, { policy: 'singleton' });
      await expect(
        startJobQueue(databaseUrl, { role: 'worker', schema, fulfilment: settings, onError }),
      ).rejects.toThrow(/Queue "fulfilment" has policy "singleton", expected "standard"/);
    } finally {
      await other.stop({ graceful: false });
    }
  });

  it('reported no pg-boss error events', () => {
    expect(errors).toEqual([]);
  });
});
