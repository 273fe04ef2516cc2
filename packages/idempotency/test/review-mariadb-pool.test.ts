/**
 * Review: the `mariadb` connector pool executor attacked — what its per-statement decoding (DATETIME read as
 * UTC, bigIntAsNumber) does to an app's own values through `tx` (a Date written then read back, in New York too:
 * this file runs in the `new-york` project; a BIGINT past 2^53), NULL and DATE columns, counts through
 * $executeRawUnsafe, and a transaction that InnoDB rolled back on its own (a deadlock victim whose callback
 * caught the error and went on).
 */
import { createScratchMariadb, type ScratchMariadb } from '@idem/mariadb-test-db';
import mariadb from 'mariadb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mariadbPoolExecutor, TransactionClosedError } from '../src/mariadb/index.ts';
import { deferred } from './support/db.ts';

let scratch: ScratchMariadb;
let pool: mariadb.Pool;
let executor: ReturnType<typeof mariadbPoolExecutor>;
type Tx = typeof executor;

beforeAll(async () => {
  scratch = await createScratchMariadb();
  const { hostname, port, username, password, pathname } = new URL(scratch.url);
  pool = mariadb.createPool({
    host: hostname,
    port: Number(port || 3306),
    user: decodeURIComponent(username),
    password: decodeURIComponent(password),
    database: pathname.slice(1),
    connectionLimit: 4,
  });
  executor = mariadbPoolExecutor(pool);
  await pool.query(
    'CREATE TABLE times (id INT PRIMARY KEY, at DATETIME(6) NULL, day DATE NULL, big BIGINT NULL, ubig BIGINT UNSIGNED NULL)',
  );
  await pool.query('CREATE TABLE rows_ (id INT PRIMARY KEY, who VARCHAR(16)) ENGINE=InnoDB');
  await pool.query(`INSERT INTO rows_ VALUES (1, 'one'), (2, 'two')`);
  await pool.query('CREATE TABLE effects (id VARCHAR(64) NOT NULL)');
});
afterAll(async () => {
  await pool?.end();
  await scratch?.drop();
});

describe('values through the executor', () => {
  it('a Date written through tx reads back as the same instant, in any process zone', async () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    const read = await executor.$transaction(async (tx) => {
      await (tx as Tx).$executeRawUnsafe('INSERT INTO times (id, at) VALUES (?, ?)', 1, at);
      return (tx as Tx).$queryRawUnsafe<Array<{ at: Date }>>('SELECT at FROM times WHERE id = 1');
    });
    expect(read[0]?.at.toISOString()).toBe(at.toISOString());
    // and through a bare statement
    await executor.$executeRawUnsafe('INSERT INTO times (id, at) VALUES (?, ?)', 2, at);
    const [bare] = await executor.$queryRawUnsafe<Array<{ at: Date }>>('SELECT at FROM times WHERE id = 2');
    expect(bare?.at.toISOString()).toBe(at.toISOString());
  });

  it('NULL times stay null; a DATE column is not taken for a DATETIME', async () => {
    await executor.$executeRawUnsafe(`INSERT INTO times (id, at, day) VALUES (3, NULL, '2026-03-04')`);
    const [row] = await executor.$queryRawUnsafe<Array<{ at: Date | null; day: unknown }>>(
      'SELECT at, day FROM times WHERE id = 3',
    );
    expect(row?.at).toBeNull();
    // Whatever the connector's own DATE decoding is, the executor leaves it alone.
    const [own] = (await pool.query('SELECT day FROM times WHERE id = 3')) as Array<{ day: unknown }>;
    expect(row?.day).toEqual(own?.day);
  });

  it('a zero DATETIME (a legacy table without NO_ZERO_DATE) reads as null, as the connector reads it — not an Invalid Date', async () => {
    const read = await executor.$transaction(async (t) => {
      const tx = t as Tx;
      await tx.$executeRawUnsafe(`SET SESSION sql_mode = ''`);
      await tx.$executeRawUnsafe(`INSERT INTO times (id, at) VALUES (5, '0000-00-00 00:00:00')`);
      await tx.$executeRawUnsafe('SET SESSION sql_mode = DEFAULT');
      return tx.$queryRawUnsafe<Array<{ at: unknown }>>('SELECT at FROM times WHERE id = 5');
    });
    const [own] = (await pool.query('SELECT at FROM times WHERE id = 5')) as Array<{ at: unknown }>;
    expect(own?.at).toBeNull();
    expect(read[0]?.at).toBeNull();
  });

  it('a BIGINT past 2^53 is not silently rounded (counts still come back as numbers)', async () => {
    await executor.$executeRawUnsafe(
      'INSERT INTO times (id, big, ubig) VALUES (4, 9007199254740993, 18446744073709551615)',
    );
    const [row] = await executor.$queryRawUnsafe<Array<{ big: unknown; ubig: unknown; n: unknown }>>(
      'SELECT big, ubig, (SELECT COUNT(*) FROM times) AS n FROM times WHERE id = 4',
    );
    expect(String(row?.big)).toBe('9007199254740993');
    expect(String(row?.ubig)).toBe('18446744073709551615');
    expect(typeof row?.n).toBe('number');
  });

  it('$executeRawUnsafe counts: an INSERT … RETURNING its rows, a SELECT its rows', async () => {
    expect(
      await executor.$executeRawUnsafe(`INSERT INTO effects (id) VALUES ('r1'), ('r2') RETURNING id`),
    ).toBe(2);
    expect(await executor.$executeRawUnsafe(`SELECT id FROM effects WHERE id LIKE 'r%'`)).toBe(2);
    expect(await executor.$executeRawUnsafe(`UPDATE effects SET id = id WHERE id LIKE 'r%'`)).toBe(2);
  });
});

describe('a transaction InnoDB rolled back itself', () => {
  it('a caught statement error that leaves the transaction open (a duplicate key) does not close it: the rest commits', async () => {
    await executor.$transaction(async (t) => {
      const tx = t as Tx;
      await tx.$executeRawUnsafe(`INSERT INTO effects (id) VALUES ('kept-1')`);
      await tx.$executeRawUnsafe(`INSERT INTO rows_ VALUES (1, 'dup')`).then(
        () => {},
        () => {},
      );
      await tx.$executeRawUnsafe(`INSERT INTO effects (id) VALUES ('kept-2')`);
    });
    const kept = (await pool.query(`SELECT id FROM effects WHERE id LIKE 'kept-%' ORDER BY id`)) as unknown[];
    expect(kept).toEqual([{ id: 'kept-1' }, { id: 'kept-2' }]);
  });

  it('a deadlock victim whose callback caught the error: its later statements are refused, nothing commits alone', async () => {
    const firstLocked = deferred<void>();
    const secondLocked = deferred<void>();
    let late: unknown;
    const run = (mine: number, other: number, locked: { resolve: () => void }, wait: Promise<void>) =>
      executor.$transaction(
        async (t) => {
          const tx = t as Tx;
          await tx.$executeRawUnsafe(`UPDATE rows_ SET who = 'x' WHERE id = ?`, mine);
          locked.resolve();
          await wait;
          const failed = await tx.$executeRawUnsafe(`UPDATE rows_ SET who = 'y' WHERE id = ?`, other).then(
            () => false,
            () => true,
          );
          if (failed) {
            // The victim's transaction is gone; this statement must not run alone.
            late = await tx.$executeRawUnsafe('INSERT INTO effects (id) VALUES (?)', `after-${mine}`).then(
              () => 'sent',
              (error: unknown) => error,
            );
          }
          return failed;
        },
        { timeout: 20_000 },
      );
    const first = run(1, 2, firstLocked, secondLocked.promise).then(
      (failed) => ({ failed }),
      (error: unknown) => ({ error }),
    );
    const second = run(2, 1, secondLocked, firstLocked.promise).then(
      (failed) => ({ failed }),
      (error: unknown) => ({ error }),
    );
    const outcomes = await Promise.all([first, second]);
    // One of the two was the victim.
    expect(outcomes.filter((o) => 'failed' in o && o.failed === false)).toHaveLength(1);
    const stray = (await pool.query(`SELECT id FROM effects WHERE id LIKE 'after-%'`)) as unknown[];
    expect(stray).toEqual([]);
    expect(late).toBeInstanceOf(TransactionClosedError);
  });
});
