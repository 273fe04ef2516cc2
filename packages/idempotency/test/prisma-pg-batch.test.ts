/**
 * `sendBatch`: several statements in one round trip with one Sync, on a real node-postgres connection of a real
 * Postgres. What the fast path relies on: each statement's result in its own slot, typed as node-postgres types
 * it; at the first error nothing after it runs (control: the same statements as separate queries do run); named
 * statements prepared once per connection, in node-postgres' own books.
 */
import { pgAdapter } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PgClientLike, sendBatch } from '../src/prisma/fast-path/pg-batch.ts';
import { ownTableUrl, uniqueTableName } from './support/db.ts';

interface PooledClient extends PgClientLike {
  query(
    config: object | string,
    values?: unknown[],
  ): Promise<{
    rows: Array<Record<string, unknown>>;
  }>;
  release(): void;
}
interface Pool {
  connect(): Promise<PooledClient>;
}

let pool: Pool;
let dispose: () => Promise<void>;

beforeAll(async () => {
  const adapter = await pgAdapter({ connectionString: await ownTableUrl(), max: 2 }).connect();
  pool = adapter.underlyingDriver() as unknown as Pool;
  dispose = () => adapter.dispose();
});
afterAll(() => dispose());

async function withClient<T>(fn: (client: PooledClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    const result = await fn(client);
    client.release();
    return result;
  } catch (error) {
    // A failed test may leave its connection inside a transaction: it does not go back to the pool.
    (client as unknown as { release(error: unknown): void }).release(error);
    throw error;
  }
}

const preparedNames = async (client: PooledClient) =>
  (await client.query('select name from pg_prepared_statements order by name')).rows.map((row) => row.name);

describe('sendBatch', () => {
  it('answers each statement in its own result, typed as node-postgres types it', async () => {
    await withClient(async (client) => {
      const at = '2026-12-01T10:00:00.000Z';
      const results = await sendBatch(client, [
        { text: 'BEGIN', values: [] },
        {
          text: 'select $1::int as n, $2::timestamptz as at, $3::boolean as yes, $4::text as none',
          values: [7, at, true, null],
        },
        { text: 'select 1 as one where false', values: [] },
        { text: 'COMMIT', values: [] },
      ]);
      expect(results).toEqual([
        { command: 'BEGIN', rowCount: null, fields: [], rows: [] },
        {
          command: 'SELECT',
          rowCount: 1,
          fields: [
            { name: 'n', dataTypeID: 23 },
            { name: 'at', dataTypeID: 1184 },
            { name: 'yes', dataTypeID: 16 },
            { name: 'none', dataTypeID: 25 },
          ],
          rows: [{ n: 7, at: new Date(at), yes: true, none: null }],
        },
        { command: 'SELECT', rowCount: 0, fields: [{ name: 'one', dataTypeID: 23 }], rows: [] },
        { command: 'COMMIT', rowCount: null, fields: [], rows: [] },
      ]);
    });
  });

  it('runs nothing after the first error, not even what came before it (control: separate queries do)', async () => {
    const table = uniqueTableName('batch');
    await withClient(async (client) => {
      await client.query(`create table ${table} (n int not null)`);
      const insert = (n: number) => ({ text: `insert into ${table} (n) values ($1)`, values: [n] });
      const failing = { text: 'select 1 / $1::int', values: [0] };
      // One Sync: the statements up to it are one implicit transaction, and the error skips the rest.
      await expect(sendBatch(client, [insert(1), failing, insert(2)])).rejects.toMatchObject({
        code: '22012',
      });
      expect((await client.query(`select n from ${table} order by n`)).rows).toEqual([]);
      // The same inside BEGIN: the statement after the error is not run, the transaction stays aborted.
      await expect(
        sendBatch(client, [{ text: 'BEGIN', values: [] }, insert(3), failing, insert(4)]),
      ).rejects.toMatchObject({ code: '22012' });
      // Still inside the transaction BEGIN opened, and aborted: the next statement is refused until ROLLBACK.
      await expect(client.query('select 1')).rejects.toMatchObject({ code: '25P02' });
      await client.query('ROLLBACK');

      // Control: each statement with its own Sync (node-postgres' queries, or its pipeline mode): the one after
      // the error runs, and commits on its own.
      await client.query(insert(5).text, insert(5).values);
      await expect(client.query(failing.text, failing.values)).rejects.toMatchObject({ code: '22012' });
      await client.query(insert(6).text, insert(6).values);
      expect((await client.query(`select n from ${table} order by n`)).rows).toEqual([{ n: 5 }, { n: 6 }]);
    });
  });

  it("prepares a named statement once per connection, in node-postgres' own books", async () => {
    await withClient(async (client) => {
      const named = { text: 'select $1::int + 1 as next', values: [1], name: 'idem_batch_test_next' };
      const [first] = await sendBatch(client, [named, { ...named, values: [2] }]);
      const [second] = await sendBatch(client, [{ ...named, values: [41] }]);
      expect([first?.rows, second?.rows]).toEqual([[{ next: 2 }], [{ next: 42 }]]);
      expect(await preparedNames(client)).toContain('idem_batch_test_next');
      // node-postgres knows it is prepared: its own named query binds it instead of parsing it again (a second
      // Parse of that name would fail with "prepared statement … already exists").
      expect((await client.query({ name: named.name, text: named.text, values: [9] })).rows).toEqual([
        { next: 10 },
      ]);
    });
  });

  it('does not count as prepared a named statement the server skipped after an error', async () => {
    await withClient(async (client) => {
      const named = { text: 'select $1::int * 2 as twice', values: [4], name: 'idem_batch_test_twice' };
      await expect(sendBatch(client, [{ text: 'select 1 / 0', values: [] }, named])).rejects.toMatchObject({
        code: '22012',
      });
      expect(await preparedNames(client)).not.toContain(named.name);
      // So the next batch parses it again, and that works.
      const [result] = await sendBatch(client, [named]);
      expect(result?.rows).toEqual([{ twice: 8 }]);
    });
  });

  it("honours the client's query_timeout: a slower batch is refused, a faster one answered", async () => {
    const client = await pool.connect();
    const parameters = (client as unknown as { connectionParameters: { query_timeout?: number } })
      .connectionParameters;
    // Wide margins on a loaded machine: 'select 1' well inside the timeout, the sleep well past it.
    parameters.query_timeout = 2_000;
    try {
      const [fast] = await sendBatch(client, [{ text: 'select 1 as one', values: [] }]);
      expect(fast?.rows).toEqual([{ one: 1 }]);
      await expect(sendBatch(client, [{ text: 'select pg_sleep(5)', values: [] }])).rejects.toThrow(
        'Query read timeout',
      );
    } finally {
      delete parameters.query_timeout;
      // The timed-out query is still running on that connection: it is not given back to the pool.
      (client as unknown as { release(error: Error): void }).release(new Error('timed out in a test'));
    }
  });

  it('books a named statement whose batch outlived query_timeout, once the server has parsed it', async () => {
    const client = await pool.connect();
    const parameters = (client as unknown as { connectionParameters: { query_timeout?: number } })
      .connectionParameters;
    parameters.query_timeout = 200;
    const slow = { name: 'idem_batch_test_slow', text: 'select pg_sleep($1::float8) as s', values: [0.6] };
    try {
      await expect(sendBatch(client, [slow])).rejects.toThrow('Query read timeout');
      delete parameters.query_timeout;
      // The statement runs on; the next batch waits for it, then binds the prepared name instead of parsing it
      // again (which would fail: 42P05, prepared statement already exists).
      const [again] = await sendBatch(client, [{ ...slow, values: [0] }]);
      expect(again?.rowCount).toBe(1);
      expect(await preparedNames(client)).toContain(slow.name);
      const [third] = await sendBatch(client, [{ ...slow, values: [0] }]);
      expect(third?.rowCount).toBe(1);
    } finally {
      delete parameters.query_timeout;
      client.release();
    }
  });

  it('refuses a name already prepared for another statement, and sends nothing', async () => {
    await withClient(async (client) => {
      const name = 'idem_batch_test_clash';
      await sendBatch(client, [{ text: 'select 1 as one', values: [], name }]);
      await expect(sendBatch(client, [{ text: 'select 2 as two', values: [], name }])).rejects.toThrow(
        `Prepared statement ${name} was already used for another statement`,
      );
      expect(client.getTransactionStatus?.()).toBe('I');
      expect((await client.query('select 3 as three')).rows).toEqual([{ three: 3 }]);
    });
  });
});
