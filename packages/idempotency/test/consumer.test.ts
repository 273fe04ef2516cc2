/**
 * The idempotent consumer's core, without a broker, on every store of the library (Postgres, SQLite, MariaDB): the
 * message id is claimed in the handler's own transaction, so a redelivery runs nothing, a redelivery with another
 * body is reported and runs nothing, a failure commits nothing and is retried with backoff, and a message that
 * keeps failing is dead-lettered after N deliveries. CONTROL: the same deliveries through a consumer without the
 * inbox run the effect once per delivery.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import type { SqliteDatabase } from '@idem/db-sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsumerAnomaly,
  type ConsumerEvent,
  createIdempotentConsumer,
  fingerprintBody,
  type QueueMessage,
} from '../src/consumer/index.ts';
import { jetStreamMessage } from '../src/consumer/jetstream/index.ts';
import { rabbitMqMessage } from '../src/consumer/rabbitmq/index.ts';
import { resolveOptions } from '../src/core/config.ts';
import type { IdempotencyStore } from '../src/core/store.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import { createMariadbIdempotencyStore } from '../src/mariadb/index.ts';
import { createPrismaIdempotencyStore, type SqlExecutor } from '../src/prisma/index.ts';
import { createSqliteIdempotencyStore } from '../src/sqlite/index.ts';
import { connectWithOwnTable } from './support/db.ts';
import { connectMariadbWithOwnTable, type MariadbWithOwnTable } from './support/mariadb.ts';
import { json, plainConsumer } from './support/queue.ts';
import { connectSqlite } from './support/sqlite-db.ts';

interface Backend {
  name: string;
  store: IdempotencyStore<SqlExecutor>;
  /** The effect: one row per execution (no unique key). */
  effect(tx: SqlExecutor, id: string): Promise<void>;
  effects(id: string): Promise<number>;
}

let postgres: Database;
let sqlite: SqliteDatabase;
let mariadb: MariadbWithOwnTable;
const backends: Backend[] = [];

function backendOf(
  name: string,
  db: SqlExecutor,
  store: IdempotencyStore<SqlExecutor>,
  param: (n: number) => string,
): Backend {
  return {
    name,
    store,
    effect: async (tx, id) => {
      await tx.$executeRawUnsafe(`insert into effects (message_id) values (${param(1)})`, id);
    },
    effects: async (id) => {
      const rows = await db.$queryRawUnsafe<Array<{ n: number | bigint }>>(
        `select count(*) as n from effects where message_id = ${param(1)}`,
        id,
      );
      return Number(rows[0]?.n ?? 0);
    },
  };
}

beforeAll(async () => {
  postgres = await connectWithOwnTable(6);
  await postgres.$executeRawUnsafe('create table effects (message_id text not null)');
  ({ db: sqlite } = await connectSqlite());
  await sqlite.$executeRawUnsafe('create table effects (message_id text not null)');
  mariadb = await connectMariadbWithOwnTable(6);
  await mariadb.db.$executeRawUnsafe('create table effects (message_id varchar(255) not null)');
  backends.push(
    backendOf('Postgres', postgres, createPrismaIdempotencyStore(postgres), (n) => `$${n}`),
    backendOf('SQLite', sqlite, createSqliteIdempotencyStore(sqlite), () => '?'),
    backendOf('MariaDB', mariadb.db, createMariadbIdempotencyStore(mariadb.db), () => '?'),
  );
});
afterAll(async () => {
  await postgres?.$disconnect();
  await sqlite?.$disconnect();
  await mariadb?.dispose();
});

function message(overrides: Partial<QueueMessage> = {}): QueueMessage {
  return {
    id: randomUUID(),
    type: 'order.ship',
    body: json({ orderId: 'o-1' }),
    deliveryCount: 1,
    headers: {},
    ...overrides,
  };
}

describe.each(['Postgres', 'SQLite', 'MariaDB'])('the idempotent consumer on %s', (storeName) => {
  const backend = () => {
    const found = backends.find((candidate) => candidate.name === storeName);
    if (!found) throw new Error(`no backend ${storeName}`);
    return found;
  };

  it('runs a message once: the first delivery executes, a redelivery acks with no effect; another body is an anomaly, reported, never run', async () => {
    const { store, effect, effects } = backend();
    const anomalies: ConsumerAnomaly[] = [];
    const events: ConsumerEvent[] = [];
    const bodies: unknown[] = [];
    const consumer = createIdempotentConsumer({
      store,
      name: 'shipping',
      handler: async (received, tx) => {
        bodies.push(received.body);
        await effect(tx, received.id);
      },
      onAnomaly: (anomaly) => anomalies.push(anomaly),
      onEvent: (event) => events.push(event),
    });
    const first = message();
    expect(await consumer.handle(first)).toEqual({ action: 'ack', outcome: 'executed' });
    expect(await consumer.handle({ ...first, deliveryCount: 2 })).toEqual({
      action: 'ack',
      outcome: 'duplicate',
    });
    const other = { ...first, body: json({ orderId: 'o-2' }), deliveryCount: 3 };
    expect(await consumer.handle(other)).toEqual({ action: 'ack', outcome: 'anomaly' });
    expect(await effects(first.id)).toBe(1);
    expect(bodies).toEqual([{ orderId: 'o-1' }]);
    expect(anomalies).toEqual([
      {
        consumer: 'shipping',
        type: 'order.ship',
        id: first.id,
        deliveryCount: 3,
        fingerprint: fingerprintBody(other.body),
        storedFingerprint: fingerprintBody(first.body),
      },
    ]);
    expect(events.map((event) => event.outcome)).toEqual(['executed', 'duplicate', 'anomaly']);

    // Another consumer (scope) or another type (procedure) of the same id is another inbox row.
    const billing = createIdempotentConsumer({
      store,
      name: 'billing',
      handler: (m, tx) => effect(tx, m.id),
    });
    expect(await billing.handle(first)).toEqual({ action: 'ack', outcome: 'executed' });
    expect(await consumer.handle({ ...first, type: 'order.cancel' })).toEqual({
      action: 'ack',
      outcome: 'executed',
    });
    expect(await effects(first.id)).toBe(3);
  });

  it('writes the inbox row completed with its claim: the effect’s transaction has no completion statement (CONTROL: a request’s run has one)', async () => {
    const { store, effect } = backend();
    const completions: string[] = [];
    const counting: IdempotencyStore<SqlExecutor> = {
      ...store,
      complete: (key, ...rest) => {
        completions.push(key.key);
        return store.complete(key, ...rest);
      },
    };
    const consumer = createIdempotentConsumer({
      store: counting,
      name: 'shipping',
      handler: (received, tx) => effect(tx, received.id),
    });
    const first = message();
    expect(await consumer.handle(first)).toEqual({ action: 'ack', outcome: 'executed' });
    expect(completions).toEqual([]);
    expect(await store.find({ scope: 'shipping', procedure: first.type, key: first.id })).toMatchObject({
      state: 'completed',
      fingerprint: fingerprintBody(first.body),
    });
    expect(await consumer.handle({ ...first, deliveryCount: 2 })).toEqual({
      action: 'ack',
      outcome: 'duplicate',
    });

    // CONTROL: the same lifecycle for a request, whose response is known only after its run, completes the key.
    const request = { scope: 'shipping', procedure: 'order.ship', key: randomUUID(), fingerprint: 'f' };
    const handled = await handleTransactional(counting, resolveOptions(), request, async (tx) => {
      await effect(tx, request.key);
      return { result: 'shipped', response: { kind: 'output', httpStatus: 200, body: '"shipped"' } };
    });
    expect(handled).toEqual({ kind: 'executed', result: 'shipped' });
    expect(completions).toEqual([request.key]);
  });

  it('refuses a run that answers another response than the one its claim wrote: nothing commits', async () => {
    const { store, effect, effects } = backend();
    const request = { scope: 'shipping', procedure: 'order.ship', key: randomUUID(), fingerprint: 'f' };
    const known = { kind: 'output', httpStatus: 200, body: '' } as const;
    await expect(
      handleTransactional(
        store,
        resolveOptions(),
        request,
        async (tx) => {
          await effect(tx, request.key);
          return { result: undefined, response: { ...known, body: 'other' } };
        },
        { responseBeforeRun: known },
      ),
    ).rejects.toThrow('must answer it or null');
    expect(await effects(request.key)).toBe(0);
    expect(await store.find(request)).toBeNull();
  });

  it('commits nothing when the handler fails: retried with backoff, dead-lettered after maxDeliveries; the inbox stays free', async () => {
    const { store, effect, effects } = backend();
    let failing = true;
    const consumer = createIdempotentConsumer({
      store,
      name: 'shipping',
      maxDeliveries: 3,
      backoff: { initialMs: 100, maxMs: 250 },
      handler: async (received, tx) => {
        await effect(tx, received.id);
        if (failing) throw new Error('the carrier is down');
      },
    });
    const poison = message();
    const decisions = [];
    for (const deliveryCount of [1, 2, 3])
      decisions.push(await consumer.handle({ ...poison, deliveryCount }));
    expect(
      decisions.map((decision) => [decision.action, 'delayMs' in decision ? decision.delayMs : null]),
    ).toEqual([
      ['retry', 100],
      ['retry', 200],
      ['dead-letter', null],
    ]);
    expect(decisions[2]).toMatchObject({ reason: 'max-deliveries', error: new Error('the carrier is down') });
    expect(await effects(poison.id)).toBe(0);
    // Nothing was claimed: once the handler works, a later delivery of the id runs.
    failing = false;
    expect(await consumer.handle({ ...poison, deliveryCount: 4 })).toEqual({
      action: 'ack',
      outcome: 'executed',
    });
    expect(await effects(poison.id)).toBe(1);
  });
});

describe('the idempotent consumer (Postgres)', () => {
  const pg = () => backends[0] as Backend;

  it('dead-letters at once what no retry can fix: a permanent error, an undecodable body, no id', async () => {
    const { store, effect, effects } = pg();
    const consumer = createIdempotentConsumer({
      store,
      name: 'shipping',
      isPermanent: (error) => error instanceof TypeError,
      handler: async (received: { body: { orderId?: string }; id: string }, tx) => {
        if (!received.body.orderId) throw new TypeError('no orderId');
        await effect(tx, received.id);
      },
    });
    const permanent = message({ body: json({}) });
    expect(await consumer.handle(permanent)).toMatchObject({ action: 'dead-letter', reason: 'permanent' });
    expect(await consumer.handle(message({ body: Buffer.from('{not json') }))).toMatchObject({
      action: 'dead-letter',
      reason: 'invalid',
    });
    expect(await consumer.handle(message({ id: '' }))).toMatchObject({
      action: 'dead-letter',
      reason: 'invalid',
    });
    expect(await consumer.handle(message({ id: 'x'.repeat(256) }))).toMatchObject({
      action: 'dead-letter',
      reason: 'invalid',
    });
    expect(await effects(permanent.id)).toBe(0);
  });

  it('two deliveries of one id at once, on two consumers of one store: one effect (CONTROL without the inbox: two)', async () => {
    const { store, effect, effects } = pg();
    const make = () =>
      createIdempotentConsumer({ store, name: 'shipping', handler: (m, tx) => effect(tx, m.id) });
    const twice = message();
    const decisions = await Promise.all([
      make().handle(twice),
      make().handle({ ...twice, deliveryCount: 2 }),
    ]);
    expect(decisions.map((decision) => decision.action === 'ack' && decision.outcome).sort()).toEqual([
      'duplicate',
      'executed',
    ]);
    expect(await effects(twice.id)).toBe(1);

    const control = plainConsumer(postgres, (m, tx) => effect(tx, m.id));
    const again = message();
    await Promise.all([control.handle(again), control.handle(again)]);
    expect(await effects(again.id)).toBe(2);
  });

  it('retries, without counting it against the message, when the store fails', async () => {
    const { store, effect } = pg();
    const consumer = createIdempotentConsumer({
      store: {
        ...store,
        transaction: async () => {
          throw new Error('the database is away');
        },
      },
      name: 'shipping',
      maxDeliveries: 1,
      backoff: { initialMs: 5, maxMs: 5 },
      handler: (m, tx) => effect(tx, m.id),
    });
    expect(await consumer.handle(message({ deliveryCount: 7 }))).toMatchObject({
      action: 'retry',
      delayMs: 5,
    });
  });

  it('refuses a configuration that cannot work', () => {
    const { store } = pg();
    const handler = async () => {};
    expect(() => createIdempotentConsumer({ store, name: '', handler })).toThrow(RangeError);
    expect(() => createIdempotentConsumer({ store, name: 'c', handler, maxDeliveries: 0 })).toThrow(
      RangeError,
    );
    expect(() =>
      createIdempotentConsumer({ store, name: 'c', handler, backoff: { initialMs: 10, maxMs: 1 } }),
    ).toThrow(RangeError);
  });
});

describe('the adapters’ translation of a delivery', () => {
  it('RabbitMQ: messageId, type (else the routing key), x-delivery-count + 1 (a classic queue’s redelivered flag at least 2), string headers', () => {
    const delivery = (properties: object, redelivered = false) => ({
      content: json({ a: 1 }),
      fields: { redelivered, routingKey: 'orders' },
      properties,
    });
    expect(
      rabbitMqMessage(
        delivery(
          { messageId: 'm-1', type: 'order.ship', headers: { 'x-delivery-count': 2, trace: 't', n: 1 } },
          true,
        ),
      ),
    ).toEqual({
      id: 'm-1',
      type: 'order.ship',
      body: json({ a: 1 }),
      deliveryCount: 3,
      headers: { trace: 't' },
    });
    expect(rabbitMqMessage(delivery({ messageId: 'm-1' }, true))).toMatchObject({
      type: 'orders',
      deliveryCount: 2,
    });
    expect(rabbitMqMessage(delivery({}))).toMatchObject({ id: '', deliveryCount: 1 });
  });

  it('JetStream: Nats-Msg-Id, Idem-Message-Type (else the subject), info.deliveryCount, the headers', () => {
    const headers = (entries: Record<string, string>) => ({
      get: (name: string) => entries[name] ?? '',
      keys: () => Object.keys(entries),
    });
    const message = (entries: Record<string, string>) => ({
      data: json({ a: 1 }),
      subject: 'orders.paid',
      headers: headers(entries),
      info: { deliveryCount: 4 },
      ack() {},
      nak() {},
      term() {},
    });
    expect(jetStreamMessage(message({ 'Nats-Msg-Id': 'm-1', 'Idem-Message-Type': 'order.paid' }))).toEqual({
      id: 'm-1',
      type: 'order.paid',
      body: json({ a: 1 }),
      deliveryCount: 4,
      headers: { 'Nats-Msg-Id': 'm-1', 'Idem-Message-Type': 'order.paid' },
    });
    expect(jetStreamMessage(message({}))).toMatchObject({ id: '', type: 'orders.paid' });
  });
});
