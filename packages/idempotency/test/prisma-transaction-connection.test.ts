/**
 * `transactionConnection`, the pooled connection of one store transaction, on a real Postgres: what it owes
 * (BEGIN, a deferred completion) goes out before anything issued after it, and every statement keeps its
 * place — a statement issued while BEGIN is still on its way is not overtaken by a later one, and a ROLLBACK
 * (Prisma's transaction timeout) issued after a statement runs after it, so that statement never runs outside
 * the transaction.
 */
import { pgAdapter } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type PoolClientLike,
  transactionConnection,
} from '../src/prisma/fast-path/transaction-connection.ts';
import { ownTableUrl, uniqueTableName } from './support/db.ts';

interface Pool {
  connect(): Promise<PoolClientLike>;
  query(text: string): Promise<{ rows: Array<Record<string, unknown>> }>;
}

let pool: Pool;
let dispose: () => Promise<void>;
const table = uniqueTableName('tc');

beforeAll(async () => {
  const adapter = await pgAdapter({ connectionString: await ownTableUrl(), max: 2 }).connect();
  pool = adapter.underlyingDriver() as unknown as Pool;
  dispose = () => adapter.dispose();
  await pool.query(`create table ${table} (id serial primary key, v text not null)`);
});
afterAll(() => dispose());

const rows = async () => (await pool.query(`select v from ${table} order by id`)).rows.map((row) => row.v);
const insert = (v: string) => ({ text: `insert into ${table} (v) values ($1)`, values: [v] });

describe('transactionConnection', () => {
  it('keeps the order of statements issued while BEGIN is still owed', async () => {
    const connection = transactionConnection(await pool.connect());
    try {
      await connection.client.query('BEGIN');
      const first = connection.client.query(insert('first'));
      const second = connection.client.query(insert('second'));
      await Promise.all([first, second]);
      await connection.client.query('COMMIT');
    } finally {
      connection.client.release();
    }
    expect(await rows()).toEqual(['first', 'second']);
    await pool.query(`truncate ${table}`);
  });

  it('runs a ROLLBACK issued after a statement after it: the statement is rolled back, not committed alone', async () => {
    const connection = transactionConnection(await pool.connect());
    try {
      await connection.client.query('BEGIN');
      const write = connection.client.query(insert('inside the transaction'));
      // What Prisma's transaction timeout sends, without waiting for the write.
      await connection.client.query('ROLLBACK');
      await write;
    } finally {
      connection.client.release();
    }
    expect(await rows()).toEqual([]);
  });

  it('sends a deferred statement before the next one, and drops it with a ROLLBACK', async () => {
    const connection = transactionConnection(await pool.connect());
    try {
      await connection.client.query('BEGIN');
      connection.deferUntilCommit(insert('deferred'));
      await connection.client.query(insert('after'));
      connection.deferUntilCommit(insert('dropped'));
      await connection.client.query('COMMIT');
      expect(await rows()).toEqual(['deferred', 'after', 'dropped']);
      await pool.query(`truncate ${table}`);

      await connection.client.query('BEGIN');
      await connection.send(insert('sent'));
      connection.deferUntilCommit(insert('never'));
      await connection.client.query('ROLLBACK');
    } finally {
      connection.client.release();
    }
    expect(await rows()).toEqual([]);
  });
});
