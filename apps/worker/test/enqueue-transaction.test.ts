/**
 * The web app enqueues fulfilment in the SAME Prisma transaction that marks the order paid:
 * `enqueueFulfilment(boss, orderId, prismaTransactionDb(tx))`. The job must exist iff that transaction commits.
 * Runs on pg-boss's default schema (as the web app does) with a sender only: nothing here consumes jobs.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import {
  DEFAULT_SCHEMA,
  enqueueFulfilment,
  type PgBoss,
  prismaTransactionDb,
  startJobQueue,
} from '@idem/jobs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDb, databaseUrl, jobsOf } from './helpers.ts';

let db: Database;
let boss: PgBoss;

beforeAll(async () => {
  db = createTestDb();
  boss = await startJobQueue(databaseUrl, { role: 'sender' });
});
afterAll(async () => {
  await boss?.stop({ graceful: false });
  await db?.$disconnect();
});

const jobCount = async (orderId: string) => (await jobsOf(db, DEFAULT_SCHEMA, orderId)).length;

it('a job sent inside a transaction that rolls back is not in the queue', async () => {
  const orderId = randomUUID();
  let idInsideTx: string | undefined;
  await expect(
    db.$transaction(async (tx) => {
      idInsideTx = await enqueueFulfilment(boss, orderId, prismaTransactionDb(tx));
      // Visible inside the transaction…
      const [row] = await tx.$queryRawUnsafe<Array<{ n: number }>>(
        `select count(*)::int as n from ${DEFAULT_SCHEMA}.job where data->>'orderId' = $1`,
        orderId,
      );
      expect(row?.n).toBe(1);
      throw new Error('the order update failed: roll everything back');
    }),
  ).rejects.toThrow('roll everything back');

  expect(idInsideTx).toEqual(expect.any(String));
  expect(await jobCount(orderId)).toBe(0);
  expect(await boss.findJobs('fulfilment', { id: idInsideTx ?? '' })).toEqual([]);
});

it('a job sent inside a transaction that commits is in the queue — and invisible until the commit', async () => {
  const orderId = randomUUID();
  const id = await db.$transaction(async (tx) => {
    const jobId = await enqueueFulfilment(boss, orderId, prismaTransactionDb(tx));
    // …but not to anyone else (a worker polling right now) before the commit.
    expect(await jobCount(orderId)).toBe(0);
    return jobId;
  });

  const [job] = await boss.findJobs<{ orderId: string }>('fulfilment', { id });
  expect(job).toMatchObject({ id, name: 'fulfilment', data: { orderId }, state: 'created', retryCount: 0 });
  expect(job?.expireInSeconds).toBeGreaterThan(0); // taken from the queue's settings, not passed by the sender
  expect(await jobCount(orderId)).toBe(1);
});

it('without a transaction, enqueueFulfilment uses pg-boss’s own pool; a malformed order id never reaches it', async () => {
  const orderId = randomUUID();
  await enqueueFulfilment(boss, orderId);
  expect(await jobCount(orderId)).toBe(1);
  await expect(enqueueFulfilment(boss, 'order-42')).rejects.toThrow(/uuid/i);
});
