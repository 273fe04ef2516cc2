/**
 * The store's statements are prepared once per connection when the client names them with
 * `idempotencyStatementName`, and no other statement is: read back from the connection's own
 * `pg_prepared_statements` (a pool of one connection, so every statement runs on it).
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterEach, describe, expect, it } from 'vitest';
import { fingerprintRequest, type StoredResponse } from '../src/index.ts';
import { createPrismaIdempotencyStore, idempotencyStatementName } from '../src/prisma/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';

let db: Database | undefined;
afterEach(async () => {
  await db?.$disconnect();
  db = undefined;
});

const output: StoredResponse = { kind: 'output', httpStatus: 200, body: '{"ok":true}' };

/** One first execution and one replay through the store, then the connection's prepared statements. */
async function preparedAfterOneRequest(client: Database): Promise<string[]> {
  const store = createPrismaIdempotencyStore(client);
  const key = { scope: uniqueScope(), procedure: 'orders.place', key: randomUUID() };
  const request = {
    ...key,
    fingerprint: fingerprintRequest('orders.place', { a: 1 }),
    owner: randomUUID(),
    leaseSeconds: 30,
    retentionSeconds: 3_600,
  };
  for (let attempt = 0; attempt < 2; attempt += 1) {
    await store.transaction(
      async (tx) => {
        const claim = await store.claim(request, tx);
        if (claim.claimed) await store.complete(key, request.owner, output, tx);
      },
      { lockTimeoutMs: 1_000, timeoutMs: 5_000 },
    );
  }
  expect(await store.find(key)).toMatchObject({ state: 'completed', response: output });
  const rows = await client.$queryRawUnsafe<Array<{ name: string }>>(
    'select name from pg_prepared_statements order by name',
  );
  return rows.map((row) => row.name);
}

describe('prepared statements (idempotencyStatementName)', () => {
  it("prepares the claim, the completion and the read on the connection, each once, and nothing of the app's", async () => {
    db = await connectWithOwnTable(1);
    const names = await preparedAfterOneRequest(db);
    // claim (with lock timeout) + complete + find: three distinct statements, however many times they ran.
    expect(names).toHaveLength(3);
    for (const name of names) expect(name).toMatch(/^idem_[0-9a-f]{24}$/);
  });

  it('control: without the name generator, the same requests leave no prepared statement', async () => {
    db = await connectWithOwnTable(1, { prepared: false });
    expect(await preparedAfterOneRequest(db)).toEqual([]);
  });

  it("names only the store's marked statements, the same name for the same text and another for another table", () => {
    expect(idempotencyStatementName('select 1')).toBe('');
    expect(idempotencyStatementName('insert into orders values ($1)')).toBe('');
    const one = '/* idem:find */ select 1 from "a"';
    expect(idempotencyStatementName(one)).toBe(idempotencyStatementName(one));
    expect(idempotencyStatementName(one)).not.toBe(
      idempotencyStatementName('/* idem:find */ select 1 from "b"'),
    );
  });

  it("marks each of the store's statements with its operation, the label Postgres' logs show", async () => {
    db = await connectWithOwnTable(2);
    const client = db;
    const sent: string[] = [];
    const recording: Database = new Proxy(client, {
      get(target, property, receiver) {
        if (property === '$queryRawUnsafe' || property === '$executeRawUnsafe')
          return (query: string, ...values: unknown[]) => {
            sent.push(query);
            return property === '$queryRawUnsafe'
              ? target.$queryRawUnsafe(query, ...values)
              : target.$executeRawUnsafe(query, ...values);
          };
        return Reflect.get(target, property, receiver);
      },
    });
    const store = createPrismaIdempotencyStore(recording);
    const key = { scope: uniqueScope(), procedure: 'orders.place', key: randomUUID() };
    const request = {
      ...key,
      fingerprint: fingerprintRequest('orders.place', { a: 1 }),
      owner: randomUUID(),
      leaseSeconds: 0,
      retentionSeconds: 3_600,
    };
    await store.claim(request);
    // Its lease (0 s) has ended: the same request takes the key over.
    expect(await store.claim({ ...request, owner: randomUUID(), leaseSeconds: 30 })).toEqual({
      claimed: true,
      takeover: true,
    });
    const owner = randomUUID();
    const other = { ...key, key: randomUUID() };
    await store.claim({ ...request, ...other, owner, leaseSeconds: 30 });
    expect(await store.renewLease?.(other, owner, 60)).toBe(true);
    expect(await store.release(other, owner)).toBe(true);
    const completed = { ...key, key: randomUUID() };
    await store.claim({ ...request, ...completed, owner, leaseSeconds: 30 });
    expect(await store.complete(completed, owner, output)).toBe(true);
    expect(await store.find(completed)).toMatchObject({ state: 'completed' });
    await store.countReplay(completed, 1);

    const labels = sent.map((sql) => sql.match(/^\/\* idem:([a-z-]+) \*\/ /)?.[1] ?? `unmarked: ${sql}`);
    expect([...new Set(labels)].sort()).toEqual([
      'claim',
      'complete',
      'count-replay',
      'find',
      'release',
      'renew',
      'takeover',
    ]);
  });
});
