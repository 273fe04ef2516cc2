/** findFulfilmentJobs against the suite's database, on a fresh pg-boss schema of its own (dropped after). */
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueFulfilment, findFulfilmentJobs, type PgBoss, Queue, startJobQueue } from '../src/index.ts';

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error('DATABASE_URL is not set: run the tests from the repo root');

const schema = `pgboss_fj_${randomBytes(5).toString('hex')}`;
let boss: PgBoss;

beforeAll(async () => {
  boss = await startJobQueue(databaseUrl, {
    role: 'sender',
    schema,
    fulfilment: { expireInSeconds: 30, retryLimit: 2, retryDelaySeconds: 1 },
    onError: () => {},
  });
});
afterAll(async () => {
  await boss.getDb().executeSql(`drop schema if exists "${schema}" cascade`, []);
  await boss.stop({ graceful: false });
});

describe('findFulfilmentJobs', () => {
  it("finds only that order's jobs, oldest first, with pg-boss's state and the handler's output", async () => {
    const order = randomUUID();
    const first = await enqueueFulfilment(boss, order);
    const [fetched] = await boss.fetch(Queue.fulfilment);
    expect(fetched?.id).toBe(first);
    await boss.complete(Queue.fulfilment, first, { note: 'shipped' });
    const second = await enqueueFulfilment(boss, order);
    await enqueueFulfilment(boss, randomUUID());

    const jobs = await findFulfilmentJobs(boss, order);
    expect(jobs.map((job) => job.id)).toEqual([first, second]);
    expect(jobs[0]).toMatchObject({ state: 'completed', output: { note: 'shipped' } });
    expect(jobs[1]).toMatchObject({ state: 'created', retryCount: 0, completedOn: null });
  });

  it('finds nothing for an order without jobs', async () => {
    expect(await findFulfilmentJobs(boss, randomUUID())).toEqual([]);
  });
});
