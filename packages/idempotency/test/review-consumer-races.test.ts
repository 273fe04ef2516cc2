/**
 * Review: the consumer whose inbox row is written completed by its claim, attacked with races on the stores
 * without Prisma (node-postgres Pool, mariadb Pool): two deliveries of one id at once from two "processes" (two
 * stores, two pools: no in-process wait between them), a redelivery with another body while the first is still
 * uncommitted (first commits → anomaly; first rolls back → the second body runs, once), and a takeover of an
 * expired inbox row whose handler throws (the expired row comes back as it was, a redelivery then runs).
 */
import { randomUUID } from 'node:crypto';
import { createScratchMariadb, type ScratchMariadb } from '@idem/mariadb-test-db';
import Database from 'better-sqlite3';
import mariadb from 'mariadb';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsumerAnomaly, createIdempotentConsumer, type QueueMessage } from '../src/consumer/index.ts';
import type { IdempotencyStore } from '../src/core/store.ts';
import { createMariadbPoolIdempotencyStore, mariadbIdempotencyKeysSchema } from '../src/mariadb/index.ts';
import { createPgIdempotencyStore } from '../src/pg/index.ts';
import type { SqlExecutor } from '../src/prisma/index.ts';
import { createBetterSqliteIdempotencyStore } from '../src/sqlite/index.ts';
import { deferred, ownTableUrl } from './support/db.ts';
import { json } from './support/queue.ts';
import { createSqliteKeyTable, scratchSqliteFile } from './support/sqlite-db.ts';

interface Backend {
  name: string;
  /** Two stores on two pools: two processes. */
  stores: [IdempotencyStore<SqlExecutor>, IdempotencyStore<SqlExecutor>];
  param: (n: number) => string;
  query(sql: string, ...values: unknown[]): Promise<Array<Record<string, unknown>>>;
  expire(id: string): Promise<void>;
}

const backends: Backend[] = [];
const pgPools: pg.Pool[] = [];
const mariadbPools: mariadb.Pool[] = [];
let scratch: ScratchMariadb;
const sqliteDatabases: Database.Database[] = [];

beforeAll(async () => {
  const url = await ownTableUrl();
  pgPools.push(
    new pg.Pool({ connectionString: url, max: 3 }),
    new pg.Pool({ connectionString: url, max: 3 }),
  );
  const [p0, p1] = pgPools as [pg.Pool, pg.Pool];
  await p0.query('create table effects (message_id text not null, body text not null)');
  backends.push({
    name: 'Postgres',
    stores: [createPgIdempotencyStore(p0), createPgIdempotencyStore(p1)] as never,
    param: (n) => `$${n}`,
    query: async (sql, ...values) => (await p0.query(sql, values)).rows,
    expire: async (id) => {
      await p0.query(`update idempotency_keys set expires_at = now() - interval '1 second' where key = $1`, [
        id,
      ]);
    },
  });

  const file = scratchSqliteFile();
  await createSqliteKeyTable(file);
  // One connection (a second one in this process would block its event loop on the write lock: the executor's
  // documented limit), two stores on it: each store's executor, yet one connection.
  sqliteDatabases.push(new Database(file, { timeout: 10_000 }));
  const [s0] = sqliteDatabases as [Database.Database];
  const s1 = s0;
  s0.exec('create table effects (message_id text not null, body text not null)');
  backends.push({
    name: 'SQLite',
    stores: [createBetterSqliteIdempotencyStore(s0), createBetterSqliteIdempotencyStore(s1)] as never,
    param: () => '?',
    query: async (sql, ...values) => s0.prepare(sql).all(...values) as Array<Record<string, unknown>>,
    expire: async (id) => {
      s0.prepare(`update idempotency_keys set expires_at = '2000-01-01T00:00:00.000Z' where key = ?`).run(id);
    },
  });

  scratch = await createScratchMariadb();
  await scratch.execute(mariadbIdempotencyKeysSchema().statements);
  const { hostname, port, username, password, pathname } = new URL(scratch.url);
  const config = {
    host: hostname,
    port: Number(port || 3306),
    user: decodeURIComponent(username),
    password: decodeURIComponent(password),
    database: pathname.slice(1),
    connectionLimit: 3,
  };
  mariadbPools.push(mariadb.createPool(config), mariadb.createPool(config));
  const [m0, m1] = mariadbPools as [mariadb.Pool, mariadb.Pool];
  await m0.query('create table effects (message_id varchar(64) not null, body text not null)');
  backends.push({
    name: 'MariaDB',
    stores: [createMariadbPoolIdempotencyStore(m0), createMariadbPoolIdempotencyStore(m1)] as never,
    param: () => '?',
    query: async (sql, ...values) => [...((await m0.query(sql, values)) as Array<Record<string, unknown>>)],
    expire: async (id) => {
      await m0.query(
        'update idempotency_keys set expires_at = TIMESTAMPADD(SECOND, -1, UTC_TIMESTAMP(6)) where `key` = ?',
        [id],
      );
    },
  });
});
afterAll(async () => {
  for (const pool of pgPools) await pool.end();
  for (const pool of mariadbPools) await pool.end();
  for (const db of sqliteDatabases) db.close();
  await scratch?.drop();
});

/**
 * Holds a handler after its effect's insert — its claim made and not committed — until `open()`; `reached` resolves
 * once a handler is there, so a test starts the next delivery only after the first has claimed (not after a
 * sleep that a loaded machine can outlast: CI run 23 did).
 */
interface Gate {
  hold(): Promise<void>;
  reached: Promise<void>;
  open(): void;
}

function gate(): Gate {
  const arrived = deferred<void>();
  const opened = deferred<void>();
  return {
    hold: () => {
      arrived.resolve();
      return opened.promise;
    },
    reached: arrived.promise,
    open: () => opened.resolve(),
  };
}

/** Time for the second delivery to reach the first's uncommitted row; the outcome is the same if it comes later. */
const aMoment = () => new Promise((resolve) => setTimeout(resolve, 100));

function message(id: string, body: unknown): QueueMessage {
  return { id, type: 'order.ship', body: json(body), deliveryCount: 1, headers: {} };
}

describe.each(['Postgres', 'MariaDB', 'SQLite'])('the consumer under races on %s (no Prisma)', (name) => {
  const backend = () => backends.find((b) => b.name === name) as Backend;
  const effectsOf = async (id: string) =>
    (
      await backend().query(
        `select body from effects where message_id = ${backend().param(1)} order by body`,
        id,
      )
    ).map((row) => String(row.body));

  function consumerOn(
    store: IdempotencyStore<SqlExecutor>,
    gate?: Gate,
    fail?: () => boolean,
    anomalies?: ConsumerAnomaly[],
  ) {
    return createIdempotentConsumer<SqlExecutor, { v: string }>({
      store,
      name: 'review-races',
      lockTimeoutMs: 10_000,
      handler: async (received, tx) => {
        await tx.$executeRawUnsafe(
          `insert into effects (message_id, body) values (${backend().param(1)}, ${backend().param(2)})`,
          received.id,
          received.body.v,
        );
        if (gate) await gate.hold();
        if (fail?.()) throw new Error('handler failed');
      },
      onAnomaly: (anomaly) => anomalies?.push(anomaly),
    });
  }

  it('two deliveries of one id at once, from two processes: one executed, one duplicate, one effect', async () => {
    const [a, b] = backend().stores;
    const id = randomUUID();
    const gated = gate();
    const first = consumerOn(a, gated).handle(message(id, { v: 'same' }));
    await gated.reached;
    const second = consumerOn(b).handle(message(id, { v: 'same' }));
    await aMoment();
    gated.open();
    const outcomes = (await Promise.all([first, second])).map((d) =>
      d.action === 'ack' ? d.outcome : d.action,
    );
    expect(outcomes.sort()).toEqual(['duplicate', 'executed']);
    expect(await effectsOf(id)).toEqual(['same']);
  });

  it('a redelivery with another body while the first is uncommitted: the first commits → an anomaly, nothing run twice', async () => {
    const [a, b] = backend().stores;
    const id = randomUUID();
    const gated = gate();
    const anomalies: ConsumerAnomaly[] = [];
    const first = consumerOn(a, gated).handle(message(id, { v: 'one' }));
    await gated.reached;
    const second = consumerOn(b, undefined, undefined, anomalies).handle(message(id, { v: 'two' }));
    await aMoment();
    gated.open();
    expect(await first).toEqual({ action: 'ack', outcome: 'executed' });
    expect(await second).toEqual({ action: 'ack', outcome: 'anomaly' });
    expect(anomalies).toHaveLength(1);
    expect(await effectsOf(id)).toEqual(['one']);
  });

  it('a redelivery with another body while the first is uncommitted: the first rolls back → the second runs, once', async () => {
    const [a, b] = backend().stores;
    const id = randomUUID();
    const gated = gate();
    const first = consumerOn(a, gated, () => true).handle(message(id, { v: 'one' }));
    await gated.reached;
    const second = consumerOn(b).handle(message(id, { v: 'two' }));
    await aMoment();
    gated.open();
    expect((await first).action).toBe('retry');
    expect(await second).toEqual({ action: 'ack', outcome: 'executed' });
    expect(await effectsOf(id)).toEqual(['two']);
  });

  it('a takeover of an expired inbox row whose handler throws: the row is as it was, a redelivery then runs once', async () => {
    const [a, b] = backend().stores;
    const id = randomUUID();
    expect(await consumerOn(a).handle(message(id, { v: 'old' }))).toEqual({
      action: 'ack',
      outcome: 'executed',
    });
    await backend().expire(id);
    const before = await a.find({ scope: 'review-races', procedure: 'order.ship', key: id });
    expect((await consumerOn(b, undefined, () => true).handle(message(id, { v: 'new' }))).action).toBe(
      'retry',
    );
    const after = await a.find({ scope: 'review-races', procedure: 'order.ship', key: id });
    expect(after).toEqual(before);
    expect(await consumerOn(b).handle(message(id, { v: 'new' }))).toEqual({
      action: 'ack',
      outcome: 'executed',
    });
    // Two concurrent redeliveries now: the row is live, both duplicates.
    const again = await Promise.all([
      consumerOn(a).handle(message(id, { v: 'new' })),
      consumerOn(b).handle(message(id, { v: 'new' })),
    ]);
    expect(again).toEqual([
      { action: 'ack', outcome: 'duplicate' },
      { action: 'ack', outcome: 'duplicate' },
    ]);
    expect(await effectsOf(id)).toEqual(['new', 'old']);
  });

  it('two takeovers of one expired row at once: one executed, one duplicate', async () => {
    const [a, b] = backend().stores;
    const id = randomUUID();
    await consumerOn(a).handle(message(id, { v: 'old' }));
    await backend().expire(id);
    const gated = gate();
    const first = consumerOn(a, gated).handle(message(id, { v: 'new' }));
    await gated.reached;
    const second = consumerOn(b).handle(message(id, { v: 'new' }));
    await aMoment();
    gated.open();
    const outcomes = (await Promise.all([first, second])).map((d) =>
      d.action === 'ack' ? d.outcome : d.action,
    );
    expect(outcomes.sort()).toEqual(['duplicate', 'executed']);
    expect(await effectsOf(id)).toEqual(['new', 'old']);
  });

  it('five deliveries of one id at once in one process, the first failing: never two executed, one effect', async () => {
    const [a] = backend().stores;
    const id = randomUUID();
    const gated = gate();
    let calls = 0;
    const consumer = consumerOn(a, gated, () => {
      calls += 1;
      return calls === 1;
    });
    const deliveries = Array.from({ length: 5 }, () => consumer.handle(message(id, { v: 'same' })));
    await gated.reached;
    gated.open();
    const outcomes = (await Promise.all(deliveries)).map((d) => (d.action === 'ack' ? d.outcome : d.action));
    expect(outcomes.filter((o) => o === 'executed')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'retry')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'duplicate')).toHaveLength(3);
    expect(await effectsOf(id)).toEqual(['same']);
  });
});
