/**
 * The MariaDB store on a plain `mariadb` connector Pool (`createMariadbPoolIdempotencyStore`, no Prisma): the
 * store contract every engine keeps (support/store-contract.ts), then what the client adds — the store's UTC
 * times read as UTC whatever the process's zone (this file also runs in the `new-york` project, where the
 * connector's own decoding is 5 hours off: the control), and a transaction past its timeout rolled back with its
 * later statements refused (control: a bare pooled connection commits that statement alone).
 */
import { createScratchMariadb, type ScratchMariadb } from '@idem/mariadb-test-db';
import mariadb from 'mariadb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMariadbPoolIdempotencyStore,
  MariadbTransactionTimeoutError,
  mariadbIdempotencyKeysSchema,
  mariadbPoolExecutor,
  type PrismaTransactionLike,
  TransactionClosedError,
} from '../src/mariadb/index.ts';
import { deferred } from './support/db.ts';
import { mariadbRows } from './support/mariadb-rows.ts';
import { describeStoreContract, type StoreBackend } from './support/store-contract.ts';
import { claimRequest, output } from './support/store-fixtures.ts';

let scratch: ScratchMariadb;
let pool: mariadb.Pool;
let executor: ReturnType<typeof mariadbPoolExecutor>;
let store: ReturnType<typeof createMariadbPoolIdempotencyStore>;

beforeAll(async () => {
  scratch = await createScratchMariadb();
  await scratch.execute(mariadbIdempotencyKeysSchema().statements);
  pool = mariadb.createPool({ ...connectionOf(scratch.url), connectionLimit: 6 });
  executor = mariadbPoolExecutor(pool);
  store = createMariadbPoolIdempotencyStore(pool);
});
afterAll(async () => {
  await pool?.end();
  await scratch?.drop();
});

function connectionOf(url: string) {
  const { hostname, port, username, password, pathname } = new URL(url);
  return {
    host: hostname,
    port: Number(port || 3306),
    user: decodeURIComponent(username),
    password: decodeURIComponent(password),
    database: pathname.slice(1),
  };
}

describeStoreContract(
  'MariaDB on a mariadb connector Pool',
  (): StoreBackend<PrismaTransactionLike<ReturnType<typeof mariadbPoolExecutor>>> => ({
    ...mariadbRows(executor, scratch),
    store,
    observer: store,
    createStore: (options) => createMariadbPoolIdempotencyStore(pool, options),
    durationTolerance: 0,
    validTableNames: ['idempotency_keys', `${connectionOf(scratch.url).database}.idempotency_keys`],
  }),
);

describe('times (the connector pool)', () => {
  it('reads the store’s UTC DATETIMEs as UTC in any process zone (CONTROL: the connector’s own decoding is off by the zone’s offset)', async () => {
    const written = '2026-01-02 03:04:05.678901';
    const utc = new Date('2026-01-02T03:04:05.678Z');
    const sql = `SELECT CAST('${written}' AS DATETIME(6)) AS t`;
    const [read] = await executor.$queryRawUnsafe<Array<{ t: Date }>>(sql);
    expect(read?.t.toISOString()).toBe(utc.toISOString());

    // CONTROL: the pool's own query reads the same text as local time (New York: 5 hours later in January).
    const [own] = (await pool.query(sql)) as Array<{ t: Date }>;
    expect((own?.t.getTime() ?? 0) - utc.getTime()).toBe(utc.getTimezoneOffset() * 60_000);

    // And through the store: a key claimed now was created within the last minute, by the database's clock.
    const request = claimRequest();
    await store.claim(request);
    await store.complete(request, request.owner, output);
    const record = await store.find(request);
    expect(Math.abs((record?.createdAt.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
  });
});

describe('its transactions (the connector pool)', () => {
  it('past its timeout: rolled back, the claim gone, a later statement of the callback refused (CONTROL: a bare pooled connection commits it alone)', async () => {
    await pool.query('CREATE TABLE IF NOT EXISTS late_effects (id VARCHAR(64) NOT NULL)');
    const request = claimRequest();
    const late = deferred();
    const lateStatement = deferred<{ sent: PromiseLike<number> }>();
    const transaction = executor.$transaction(
      async (tx) => {
        await store.claim(request, tx as never);
        await late.promise;
        const sent = (tx as typeof executor).$executeRawUnsafe(
          'INSERT INTO late_effects (id) VALUES (?)',
          request.key,
        );
        lateStatement.resolve({ sent });
        await sent;
      },
      { timeout: 200 },
    );
    await expect(transaction).rejects.toBeInstanceOf(MariadbTransactionTimeoutError);
    late.resolve();
    const { sent } = await lateStatement.promise;
    await expect(sent).rejects.toBeInstanceOf(TransactionClosedError);
    expect(await store.find(request)).toBeNull();
    const count = async (id: string) =>
      Number(
        (
          (await pool.query('SELECT COUNT(*) AS n FROM late_effects WHERE id = ?', [id])) as [{ n: bigint }]
        )[0].n,
      );
    expect(await count(request.key)).toBe(0);

    // CONTROL: BEGIN, ROLLBACK (what the timeout sends), then the callback's next statement on the same connection.
    const connection = await pool.getConnection();
    try {
      await connection.query('BEGIN');
      await connection.query('ROLLBACK');
      await connection.query('INSERT INTO late_effects (id) VALUES (?)', ['control']);
    } finally {
      await connection.release();
    }
    expect(await count('control')).toBe(1);
  });
});
