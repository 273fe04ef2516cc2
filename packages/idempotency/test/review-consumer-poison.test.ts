/**
 * Review: a message the inbox can never hold. The consumer takes an id of up to 255 characters and any non-empty
 * type, but MariaDB's key table holds at most 255 BYTES (UTF-8) of key and of procedure: a longer one is refused
 * before any SQL (MariadbKeyColumnTooLongError), on every delivery. Taken for the store's failure, such a message
 * was retried forever (never dead-lettered: store failures do not count towards maxDeliveries) — a poison message.
 */
import { randomUUID } from 'node:crypto';
import { createScratchMariadb, type ScratchMariadb } from '@idem/mariadb-test-db';
import mariadb from 'mariadb';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotentConsumer, type QueueMessage } from '../src/consumer/index.ts';
import type { IdempotencyStore } from '../src/core/store.ts';
import { createMariadbPoolIdempotencyStore, mariadbIdempotencyKeysSchema } from '../src/mariadb/index.ts';
import { createPgIdempotencyStore } from '../src/pg/index.ts';
import type { SqlExecutor } from '../src/prisma/index.ts';
import { ownTableUrl } from './support/db.ts';
import { json } from './support/queue.ts';

let scratch: ScratchMariadb;
let pool: mariadb.Pool;
let store: IdempotencyStore<SqlExecutor>;

beforeAll(async () => {
  scratch = await createScratchMariadb();
  await scratch.execute(mariadbIdempotencyKeysSchema().statements);
  const { hostname, port, username, password, pathname } = new URL(scratch.url);
  pool = mariadb.createPool({
    host: hostname,
    port: Number(port || 3306),
    user: decodeURIComponent(username),
    password: decodeURIComponent(password),
    database: pathname.slice(1),
    connectionLimit: 2,
  });
  store = createMariadbPoolIdempotencyStore(pool) as never;
});
afterAll(async () => {
  await pool?.end();
  await scratch?.drop();
});

function delivery(overrides: Partial<QueueMessage>): QueueMessage {
  return {
    id: randomUUID(),
    type: 'order.ship',
    body: json({}),
    deliveryCount: 1,
    headers: {},
    ...overrides,
  };
}

describe('a message the MariaDB inbox cannot hold', () => {
  const consumer = () =>
    createIdempotentConsumer<SqlExecutor>({
      store,
      name: 'review-poison',
      maxDeliveries: 3,
      handler: async () => {},
    });

  it('an id of 200 characters but 400 bytes is dead-lettered as invalid, not retried forever', async () => {
    const decision = await consumer().handle(delivery({ id: 'é'.repeat(200), deliveryCount: 50 }));
    expect(decision).toMatchObject({ action: 'dead-letter', reason: 'invalid' });
  });

  it('a type longer than the procedure column is dead-lettered as invalid', async () => {
    const decision = await consumer().handle(delivery({ type: 't'.repeat(300), deliveryCount: 50 }));
    expect(decision).toMatchObject({ action: 'dead-letter', reason: 'invalid' });
  });

  it('CONTROL: an id that fits is executed', async () => {
    expect(await consumer().handle(delivery({ id: 'é'.repeat(100) }))).toEqual({
      action: 'ack',
      outcome: 'executed',
    });
  });
});

describe('a message the Postgres inbox cannot hold', () => {
  it('a type too long for the primary key’s index entry (btree: 2 704 bytes) is dead-lettered as invalid, not retried forever', async () => {
    const pgPool = new pg.Pool({ connectionString: await ownTableUrl(), max: 2 });
    try {
      const consumer = createIdempotentConsumer<SqlExecutor>({
        store: createPgIdempotencyStore(pgPool) as never,
        name: 'review-poison',
        maxDeliveries: 3,
        handler: async () => {},
      });
      // Random, so that TOAST compression cannot shrink the entry under the limit.
      const type = Array.from({ length: 300 }, () => randomUUID().slice(0, 10)).join('');
      const decision = await consumer.handle(delivery({ type, deliveryCount: 50 }));
      expect(decision).toMatchObject({ action: 'dead-letter', reason: 'invalid' });
    } finally {
      await pgPool.end();
    }
  });
});
