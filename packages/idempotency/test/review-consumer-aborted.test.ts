/**
 * Review: a consumer's handler that catches a failed statement and returns normally. On Postgres the failed
 * statement aborts the transaction; its COMMIT then succeeds as a ROLLBACK (command tag "ROLLBACK", no error).
 * Since the inbox row is written completed by the claim (no completion UPDATE after the handler, which used to
 * fail on the aborted transaction), nothing runs between the handler and that COMMIT: the consumer reports
 * "executed" and acks a message whose effect and inbox row were both rolled back — the message is lost.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotentConsumer, type QueueMessage } from '../src/consumer/index.ts';
import type { IdempotencyStore } from '../src/core/store.ts';
import { createPgIdempotencyStore } from '../src/pg/index.ts';
import type { SqlExecutor } from '../src/prisma/index.ts';
import { ownTableUrl } from './support/db.ts';
import { json } from './support/queue.ts';

let pool: pg.Pool;
let url: string;

beforeAll(async () => {
  url = await ownTableUrl();
  pool = new pg.Pool({ connectionString: url, max: 3 });
  await pool.query('create table effects (message_id text not null)');
  await pool.query('create table ledger (id text primary key)');
  await pool.query(`insert into ledger (id) values ('taken')`);
});
afterAll(async () => {
  await pool?.end();
});

function message(): QueueMessage {
  return {
    id: randomUUID(),
    type: 'order.ship',
    body: json({ orderId: 'o-1' }),
    deliveryCount: 1,
    headers: {},
  };
}

const count = async (sql: string, id: string) => Number((await pool.query(sql, [id])).rows[0]?.n ?? 0);

describe('a handler that swallows a failed statement (Postgres, node-postgres Pool)', () => {
  it('is never acked as executed when its transaction was rolled back by the database', async () => {
    const store = createPgIdempotencyStore(pool) as unknown as IdempotencyStore<SqlExecutor>;
    const consumer = createIdempotentConsumer({
      store,
      name: 'review-aborted',
      handler: async (received, tx) => {
        await tx.$executeRawUnsafe('insert into effects (message_id) values ($1)', received.id);
        // "Insert if absent" by catching the unique violation: the transaction is now aborted.
        await tx.$executeRawUnsafe(`insert into ledger (id) values ('taken')`).then(
          () => {},
          () => {},
        );
      },
    });
    const delivery = message();
    const decision = await consumer.handle(delivery);
    const effects = await count('select count(*)::int as n from effects where message_id = $1', delivery.id);
    const inbox = await count('select count(*)::int as n from idempotency_keys where key = $1', delivery.id);
    // Whatever the consumer answers, it must not ack as executed a message none of whose writes committed.
    if (decision.action === 'ack') expect({ effects, inbox }).toEqual({ effects: 1, inbox: 1 });
    else
      expect({ action: decision.action, effects, inbox }).toEqual({ action: 'retry', effects: 0, inbox: 0 });
  });

  it('through Prisma too (PrismaPg): never acked as executed when its transaction was rolled back', async () => {
    const { createPrismaClient } = await import('@idem/db');
    const { createPrismaIdempotencyStore } = await import('../src/prisma/index.ts');
    const db = createPrismaClient({ connectionString: url, max: 2 });
    try {
      const consumer = createIdempotentConsumer({
        store: createPrismaIdempotencyStore(db) as unknown as IdempotencyStore<SqlExecutor>,
        name: 'review-aborted-prisma',
        handler: async (received, tx) => {
          await tx.$executeRawUnsafe('insert into effects (message_id) values ($1)', received.id);
          await tx.$executeRawUnsafe(`insert into ledger (id) values ('taken')`).then(
            () => {},
            () => {},
          );
        },
      });
      const delivery = message();
      const decision = await consumer.handle(delivery);
      const effects = await count(
        'select count(*)::int as n from effects where message_id = $1',
        delivery.id,
      );
      const inbox = await count(
        'select count(*)::int as n from idempotency_keys where key = $1',
        delivery.id,
      );
      if (decision.action === 'ack') expect({ effects, inbox }).toEqual({ effects: 1, inbox: 1 });
      else
        expect({ action: decision.action, effects, inbox }).toEqual({
          action: 'retry',
          effects: 0,
          inbox: 0,
        });
    } finally {
      await db.$disconnect();
    }
  });

  it('after a failed statement (rethrown, or swallowed) the one pooled connection is clean for the next transaction', async () => {
    const { pgPoolExecutor, CommitRolledBackError } = await import('../src/pg/index.ts');
    const one = new pg.Pool({ connectionString: url, max: 1 });
    try {
      const executor = pgPoolExecutor(one);
      await expect(
        executor.$transaction(async (tx) => {
          await (tx as unknown as SqlExecutor).$executeRawUnsafe('select 1/0');
        }),
      ).rejects.toThrow(/division by zero/);
      await expect(
        executor.$transaction(async (tx) => {
          await (tx as unknown as SqlExecutor).$executeRawUnsafe('select 1/0').then(
            () => {},
            () => {},
          );
        }),
      ).rejects.toBeInstanceOf(CommitRolledBackError);
      const id = randomUUID();
      await executor.$transaction(async (tx) => {
        await (tx as unknown as SqlExecutor).$executeRawUnsafe(
          'insert into effects (message_id) values ($1)',
          id,
        );
      });
      expect(await count('select count(*)::int as n from effects where message_id = $1', id)).toBe(1);
    } finally {
      await one.end();
    }
  });

  it('through Prisma on the fast path: never acked as executed when its transaction was rolled back', async () => {
    const { createPrismaClient, pgAdapter } = await import('@idem/db');
    const { createPrismaIdempotencyStore, withIdempotencyFastPath } = await import('../src/prisma/index.ts');
    const adapter = withIdempotencyFastPath(pgAdapter({ connectionString: url, max: 2 }));
    const db = createPrismaClient({ adapter });
    try {
      const consumer = createIdempotentConsumer({
        store: createPrismaIdempotencyStore(db, {
          fastPath: adapter,
        }) as unknown as IdempotencyStore<SqlExecutor>,
        name: 'review-aborted-fast',
        handler: async (received, tx) => {
          await tx.$executeRawUnsafe('insert into effects (message_id) values ($1)', received.id);
          await tx.$executeRawUnsafe(`insert into ledger (id) values ('taken')`).then(
            () => {},
            () => {},
          );
        },
      });
      const delivery = message();
      const decision = await consumer.handle(delivery);
      const effects = await count(
        'select count(*)::int as n from effects where message_id = $1',
        delivery.id,
      );
      const inbox = await count(
        'select count(*)::int as n from idempotency_keys where key = $1',
        delivery.id,
      );
      expect({ action: decision.action, effects, inbox }).toEqual({ action: 'retry', effects: 0, inbox: 0 });
    } finally {
      await db.$disconnect();
    }
  });

  it('the pooled executor reports a COMMIT the server turned into a ROLLBACK as a failure', async () => {
    const { pgPoolExecutor } = await import('../src/pg/index.ts');
    const outcome = await pgPoolExecutor(pool)
      .$transaction(async (tx) => {
        const on = tx as unknown as SqlExecutor;
        await on.$executeRawUnsafe(`insert into ledger (id) values ('taken')`).then(
          () => {},
          () => {},
        );
        return 'committed';
      })
      .then(
        (value) => value,
        (error: unknown) => (error as Error).name,
      );
    expect(outcome).not.toBe('committed');
  });
});
