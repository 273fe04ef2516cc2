/**
 * The Postgres store on a plain node-postgres Pool (`@idem/idempotency/pg`): the store contract every engine keeps
 * (support/store-contract.ts), with no Prisma between the store and the driver; and its transactions' bounds — a
 * transaction past its timeout is rolled back and its later statements refused (the fence), with a control on a
 * bare pooled client.
 */
import { createPrismaClient, type Database } from '@idem/db';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createPgIdempotencyStore,
  type PgPoolExecutor,
  PgTransactionTimeoutError,
  pgPoolExecutor,
  TransactionClosedError,
} from '../src/pg/index.ts';
import type { PrismaTransactionLike } from '../src/prisma/index.ts';
import { ownTableUrl, uniqueTableName } from './support/db.ts';
import { postgresRows } from './support/postgres-rows.ts';
import { describeStoreContract, type StoreBackend } from './support/store-contract.ts';
import { claimRequest, keyOf } from './support/store-fixtures.ts';

let pool: pg.Pool;
let rowsDb: Database;
let store: ReturnType<typeof createPgIdempotencyStore>;

beforeAll(async () => {
  const url = await ownTableUrl();
  pool = new pg.Pool({ connectionString: url, max: 4 });
  rowsDb = createPrismaClient({ connectionString: url, max: 2 });
  store = createPgIdempotencyStore(pool);
});
afterAll(async () => {
  await pool.end();
  await rowsDb.$disconnect();
});

describeStoreContract(
  'Postgres on a node-postgres Pool',
  (): StoreBackend<PrismaTransactionLike<PgPoolExecutor>> => ({
    ...postgresRows(rowsDb),
    store,
    observer: store,
    createStore: (options) => createPgIdempotencyStore(pool, options),
    durationTolerance: 0,
    validTableNames: ['idempotency_keys'],
  }),
);

describe('its transactions', () => {
  it('past its timeout: rolled back, the claim gone, a later statement of the callback refused', async () => {
    const effects = uniqueTableName('pg_late');
    await pool.query(`create table ${effects} (scope text not null)`);
    const request = claimRequest();
    let late: unknown;
    let callback: Promise<void> = Promise.resolve();
    let timedOut: Promise<unknown> = Promise.resolve();
    const transaction = pgPoolExecutor(pool).$transaction(
      (tx) => {
        callback = (async () => {
          await store.claim(request, tx as never);
          await timedOut; // the timeout (100 ms) has fired and rolled back; the callback goes on
          late = await Promise.resolve(
            (tx as PrismaTransactionLike<PgPoolExecutor>).$executeRawUnsafe(
              `insert into ${effects} (scope) values ($1)`,
              request.scope,
            ),
          ).catch((error: unknown) => error);
        })();
        return callback;
      },
      { timeout: 100 },
    );
    timedOut = transaction.catch(() => {});
    await expect(transaction).rejects.toBeInstanceOf(PgTransactionTimeoutError);
    await callback;
    expect(late).toBeInstanceOf(TransactionClosedError);
    expect(await store.find(keyOf(request))).toBeNull();
    const { rows } = await pool.query(`select 1 from ${effects} where scope = $1`, [request.scope]);
    expect(rows).toEqual([]);
  });

  it('CONTROL: a transaction on a pooled client without the fence lets that statement commit alone', async () => {
    const effects = uniqueTableName('pg_naive');
    await pool.query(`create table ${effects} (scope text not null)`);
    const client = await pool.connect();
    try {
      // What a pool transaction without the fence does: BEGIN, the timeout's ROLLBACK, the callback goes on.
      await client.query('BEGIN');
      await client.query('ROLLBACK');
      await client.query(`insert into ${effects} (scope) values ('late')`);
    } finally {
      client.release();
    }
    expect((await pool.query(`select scope from ${effects}`)).rows).toEqual([{ scope: 'late' }]);
  });
});
