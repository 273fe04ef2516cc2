import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProvider } from '../src/index.ts';
import {
  createTestDatabase,
  postCharge,
  SECRET,
  type TestDatabase,
  uniqueOrder,
  validCharge,
} from './helpers.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

describe('startProvider', () => {
  it('survives 8 concurrent startups on a fresh database (schema DDL is serialized)', async () => {
    const started = await Promise.allSettled(
      Array.from({ length: 8 }, () => startProvider({ databaseUrl: db.url, port: 0, secretKey: SECRET })),
    );
    const providers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    try {
      expect(started.filter((s) => s.status === 'rejected')).toEqual([]);
      expect(new Set(providers.map((p) => p.port)).size).toBe(8);
      for (const p of providers) {
        expect(p.url).toBe(`http://127.0.0.1:${p.port}`);
        const res = await postCharge(p.url, validCharge(uniqueOrder()));
        expect(res.status).toBe(200);
      }
    } finally {
      await Promise.all(providers.map((p) => p.close()));
    }
  });

  it('keeps to its own schema: nothing is created in public', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const tables = await client.query<{ schema: string; name: string }>(
        `SELECT table_schema AS schema, table_name AS name FROM information_schema.tables
          WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`,
      );
      expect(tables.rows).toEqual([
        { schema: 'provider', name: 'charges' },
        { schema: 'provider', name: 'events' },
        { schema: 'provider', name: 'idempotency_keys' },
        { schema: 'provider', name: 'refunds' },
        { schema: 'provider', name: 'webhook_deliveries' },
      ]);
    } finally {
      await client.end();
    }
  });

  it('restarts on an existing schema and keeps the data', async () => {
    const order = uniqueOrder();
    const first = await startProvider({ databaseUrl: db.url, port: 0, secretKey: SECRET });
    const charged = await postCharge(first.url, validCharge(order), { key: 'restart-key' });
    await first.close();
    await first.close(); // idempotent

    const second = await startProvider({ databaseUrl: db.url, port: 0, secretKey: SECRET });
    try {
      const replay = await postCharge(second.url, validCharge(order), { key: 'restart-key' });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(charged.text);
    } finally {
      await second.close();
    }
  });

  it('rejects on a busy port and releases its pool', async () => {
    const first = await startProvider({ databaseUrl: db.url, port: 0 });
    try {
      await expect(startProvider({ databaseUrl: db.url, port: first.port })).rejects.toMatchObject({
        code: 'EADDRINUSE',
      });
    } finally {
      await first.close();
    }
  });

  it('rejects when the database is unreachable', async () => {
    await expect(
      startProvider({ databaseUrl: 'postgresql://postgres@127.0.0.1:1/nope', port: 0 }),
    ).rejects.toThrow();
  });

  it('close() waits for an in-flight request', async () => {
    const p = await startProvider({ databaseUrl: db.url, port: 0, secretKey: SECRET, testKnobs: true });
    await fetch(`${p.url}/__knobs`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ chargeHold: true }),
    });
    const pending = postCharge(p.url, validCharge(uniqueOrder()));
    // The charge is committed and its response waits: a request in flight when close() starts.
    expect((await fetch(`${p.url}/__charges/held?atLeast=1&timeoutMs=30000`)).status).toBe(200);
    await p.close(); // lets the held response go, and waits for it
    expect((await pending).status).toBe(200);
  });
});
