/**
 * The outbox on Postgres, without a broker (its broker runs are in consumer-rabbitmq and consumer-jetstream): the
 * table its schema function defines (run twice, and as the README shows it), a row marked sent only after the
 * publisher resolved, relays side by side taking different rows (CONTROL: without SKIP LOCKED's row locks, both
 * publish the same rows), the relay loop, and the cleanup of sent rows.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createOutbox,
  DEFAULT_OUTBOX_TABLE,
  type OutboxPublisher,
  type OutboxRecord,
  outboxSchema,
} from '../src/consumer/index.ts';
import { connectWithOwnTable, deferred } from './support/db.ts';
import { unique } from './support/queue.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable(6);
});
afterAll(async () => {
  await db?.$disconnect();
});

async function freshOutbox() {
  const table = unique('outbox').replace('-', '_');
  for (const statement of outboxSchema(table).statements) await db.$executeRawUnsafe(statement);
  return { table, outbox: createOutbox(db, { table }) };
}

function collecting(published: OutboxRecord[]): OutboxPublisher {
  return {
    async publish(messages) {
      published.push(...messages);
    },
  };
}

describe('the outbox table', () => {
  it('is created by outboxSchema().statements, which run again change nothing; the README shows its SQL verbatim', async () => {
    const { table } = await freshOutbox();
    const shape = () =>
      db.$queryRawUnsafe<Array<{ line: string }>>(
        `select indexdef as line from pg_indexes where tablename = $1
         union all select column_name || ' ' || data_type || ' ' || is_nullable from information_schema.columns
         where table_name = $1 order by line`,
        table,
      );
    const before = await shape();
    for (const statement of outboxSchema(table).statements) await db.$executeRawUnsafe(statement);
    expect(await shape()).toEqual(before);
    // The relay's scan (sent_at is null, in seq order) and the cleanup's (sent_at < …): one index.
    expect(before.some((row) => row.line.endsWith(`.${table} USING btree (sent_at, seq)`))).toBe(true);
    expect(before.some((row) => row.line.includes(`UNIQUE INDEX ${table}_id_key`))).toBe(true);
    const readme = readFileSync(path.resolve(import.meta.dirname, '../README.md'), 'utf8');
    expect(DEFAULT_OUTBOX_TABLE).toBe('idempotency_outbox');
    expect(
      readme.includes(`\`\`\`sql\n${outboxSchema().ddl}\`\`\``),
      'the README shows outboxSchema().ddl',
    ).toBe(true);
  });
});

describe('the relay', () => {
  it('publishes unsent rows in order with their exact body and marks them sent only once the publisher resolved', async () => {
    const { outbox } = await freshOutbox();
    const ids = await db.$transaction(async (tx) => [
      await outbox.enqueue(tx, { type: 'a', destination: 'q', body: { b: 1, a: [true, null] } }),
      await outbox.enqueue(tx, {
        id: 'fixed',
        type: 'b',
        destination: 'q',
        body: 'text',
        headers: { h: 'v' },
      }),
    ]);
    expect(ids[1]).toBe('fixed');
    const published: OutboxRecord[] = [];
    const confirmed = deferred();
    const pass = outbox.relayBatch({
      async publish(messages) {
        published.push(...messages);
        await confirmed.promise;
      },
    });
    await expect.poll(() => published.length).toBe(2);
    // Published, not yet confirmed: still unsent.
    expect(await outbox.countUnsent()).toBe(2);
    confirmed.resolve();
    expect(await pass).toBe(2);
    expect(await outbox.countUnsent()).toBe(0);
    expect(published).toEqual([
      { id: ids[0], type: 'a', destination: 'q', body: '{"b":1,"a":[true,null]}', headers: {} },
      { id: 'fixed', type: 'b', destination: 'q', body: '"text"', headers: { h: 'v' } },
    ]);
    expect(await outbox.relayBatch(collecting(published))).toBe(0);
  });

  it('leaves the rows unsent when the publish fails (no confirm), for the next pass', async () => {
    const { outbox } = await freshOutbox();
    await db.$transaction((tx) => outbox.enqueue(tx, { type: 'a', destination: 'q', body: 1 }));
    await expect(
      outbox.relayBatch({
        publish: async () => {
          throw new Error('nacked');
        },
      }),
    ).rejects.toThrow('nacked');
    expect(await outbox.countUnsent()).toBe(1);
    const published: OutboxRecord[] = [];
    expect(await outbox.relayBatch(collecting(published))).toBe(1);
    expect(published).toHaveLength(1);
  });

  it('two relays at once take different rows (CONTROL: the same scan without its row locks publishes rows twice)', async () => {
    const { table, outbox } = await freshOutbox();
    await db.$transaction(async (tx) => {
      for (let i = 0; i < 20; i += 1) await outbox.enqueue(tx, { type: 'a', destination: 'q', body: i });
    });
    // Both relays read their batch before either publishes: the first holds its rows until the second has read.
    const first: OutboxRecord[] = [];
    const second: OutboxRecord[] = [];
    const firstRead = deferred();
    const secondDone = deferred();
    const a = outbox.relayBatch(
      {
        async publish(messages) {
          first.push(...messages);
          firstRead.resolve();
          await secondDone.promise;
        },
      },
      { batchSize: 12 },
    );
    await firstRead.promise;
    const b = outbox.relayBatch(collecting(second), { batchSize: 12 });
    expect(await b).toBe(8);
    secondDone.resolve();
    expect(await a).toBe(12);
    const all = [...first, ...second].map((message) => message.id);
    expect(new Set(all).size).toBe(20);
    expect(all).toHaveLength(20);

    // CONTROL: the same two reads without FOR UPDATE SKIP LOCKED.
    await db.$executeRawUnsafe(`update ${table} set sent_at = null`);
    const read = () =>
      db.$queryRawUnsafe<Array<{ id: string }>>(
        `select id from ${table} where sent_at is null order by seq limit 12`,
      );
    const [x, y] = await Promise.all([read(), read()]);
    const overlap = (x ?? []).filter((row) => (y ?? []).some((other) => other.id === row.id));
    expect(overlap).toHaveLength(12);
  });

  it('startRelay publishes in passes until stopped; deleteSent removes sent rows past their age', async () => {
    const { outbox } = await freshOutbox();
    await db.$transaction(async (tx) => {
      for (let i = 0; i < 25; i += 1) await outbox.enqueue(tx, { type: 'a', destination: 'q', body: i });
    });
    const published: OutboxRecord[] = [];
    const relay = outbox.startRelay(collecting(published), { batchSize: 10, idleMs: 10 });
    await expect.poll(() => outbox.countUnsent()).toBe(0);
    await relay.stop();
    expect(published.map((message) => message.body)).toEqual(Array.from({ length: 25 }, (_, i) => String(i)));
    expect(await outbox.deleteSent(3_600)).toBe(0);
    expect(await outbox.deleteSent(0, 20)).toBe(20);
    expect(await outbox.deleteSent(0)).toBe(5);
  });
});
