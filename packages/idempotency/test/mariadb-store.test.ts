/**
 * The MariaDB store on the real MariaDB (a scratch database of this file's own): the store contract every engine
 * keeps (support/store-contract.ts), then what is MariaDB's own: keys compared byte for byte (VARBINARY, not a
 * collation), times in UTC whatever the session's time zone, the columns' byte limits as typed errors, a missing
 * table explained, the duplicate's locking read past its REPEATABLE READ snapshot, the lock wait bounded per
 * statement, and cleanup run again as a deadlock victim (1213).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredResponse } from '../src/index.ts';
import { explainingMissingMariadbTable } from '../src/mariadb/errors.ts';
import {
  createMariadbIdempotencyStore,
  MariadbIdempotencyTableMissingError,
  MariadbKeyColumnTooLongError,
  MariadbResponseTooLargeError,
  type PrismaTransactionLike,
} from '../src/mariadb/index.ts';
import { hasMariadbErrno } from '../src/mariadb/sql.ts';
import { sleep, uniqueTableName, waitUntil } from './support/db.ts';
import { connectMariadbWithOwnTable, type MariadbWithOwnTable } from './support/mariadb.ts';
import { mariadbRows, where } from './support/mariadb-rows.ts';
import {
  claimHeldOpen,
  describeStoreContract,
  type StoreBackend,
  seedCleanupRows,
  withKeyTable,
} from './support/store-contract.ts';
import { claimRequest, keyOf, output } from './support/store-fixtures.ts';

let mariadb: MariadbWithOwnTable;
let db: MariadbWithOwnTable['db'];
let store: ReturnType<typeof createMariadbIdempotencyStore<MariadbWithOwnTable['db']>>;

beforeAll(async () => {
  mariadb = await connectMariadbWithOwnTable();
  db = mariadb.db;
  store = createMariadbIdempotencyStore(db);
});
afterAll(async () => {
  await mariadb?.dispose();
});

describeStoreContract(
  'MariaDB',
  (): StoreBackend<PrismaTransactionLike<MariadbWithOwnTable['db']>> => ({
    ...mariadbRows(db, mariadb.scratch),
    store,
    // A pool: another connection reads while a transaction holds one.
    observer: store,
    createStore: (options) => createMariadbIdempotencyStore(db, options),
    // DATETIME(6) keeps microseconds, and TIMESTAMPDIFF(MICROSECOND) is exact.
    durationTolerance: 0,
    validTableNames: ['idempotency_keys', 'test.idempotency_keys'],
  }),
);

describe('keys, times and limits (MariaDB)', () => {
  it('keys compare byte for byte: case and trailing spaces make another key (control: a VARCHAR column in the default collation merges them)', async () => {
    const first = claimRequest({ key: 'Order-Key' });
    await store.claim(first);
    for (const key of ['order-key', 'ORDER-KEY', 'Order-Key '])
      expect(await store.claim({ ...first, owner: randomUUID(), key })).toEqual({
        claimed: true,
        takeover: false,
      });
    expect((await store.claim({ ...first, owner: randomUUID() })).claimed).toBe(false);

    // Control: the same primary key on VARCHAR in the server's default collation says these keys are one.
    const table = uniqueTableName('collation_keys');
    await db.$executeRawUnsafe(
      `CREATE TABLE \`${table}\` (k VARCHAR(255) NOT NULL PRIMARY KEY) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci`,
    );
    try {
      const inserted = [];
      for (const key of ['Order-Key', 'order-key', 'ORDER-KEY', 'Order-Key '])
        inserted.push(await db.$executeRawUnsafe(`INSERT IGNORE INTO \`${table}\` (k) VALUES (?)`, key));
      expect(inserted).toEqual([1, 0, 0, 0]);
    } finally {
      await db.$executeRawUnsafe(`DROP TABLE \`${table}\``);
    }
  });

  it('a session in another time zone sees the same lease (times are UTC_TIMESTAMP, not NOW)', async () => {
    const request = claimRequest({ leaseSeconds: 30 });
    await db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SET time_zone = '+10:00'`);
      await store.claim(request, tx);
      await tx.$executeRawUnsafe(`SET time_zone = @@global.time_zone`);
    });
    expect(await store.find(keyOf(request))).toMatchObject({ leaseActive: true });
    // Control: the lease measured against the session's NOW() in +10:00 would read as 10 hours in the past.
    const [row] = await db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SET time_zone = '+10:00'`);
      const rows = await tx.$queryRawUnsafe<Array<{ live: bigint }>>(
        `SELECT locked_until > NOW(6) AS live FROM idempotency_keys WHERE ${where}`,
        request.scope,
        request.procedure,
        request.key,
      );
      await tx.$executeRawUnsafe(`SET time_zone = @@global.time_zone`);
      return rows;
    });
    expect(Number(row?.live)).toBe(0);
  });

  it('a scope or procedure longer than its column is refused with a typed error, and nothing is stored', async () => {
    const long = claimRequest({ scope: 'é'.repeat(257) }); // 514 bytes
    const scopeError = await store.claim(long).catch((caught: unknown) => caught);
    expect(scopeError).toBeInstanceOf(MariadbKeyColumnTooLongError);
    expect(scopeError).toMatchObject({
      name: 'MariadbKeyColumnTooLongError',
      column: 'scope',
      bytes: 514,
      message:
        'The idempotency scope is 514 bytes (UTF-8); the MariaDB key table holds at most 512. ' +
        'Use a shorter scope (e.g. a user id).',
    });
    // The other columns are named as they are: no hint about user ids.
    await expect(store.claim(claimRequest({ procedure: 'p'.repeat(256) }))).rejects.toThrow(
      'The idempotency procedure is 256 bytes (UTF-8); the MariaDB key table holds at most 255. Use a shorter procedure.',
    );
    await expect(store.claim(claimRequest({ key: 'k'.repeat(256) }))).rejects.toThrow(
      /at most 255\. Use a shorter key\.$/,
    );
    expect(
      await mariadbRows(db, mariadb.scratch).rowCount({ ...long, scope: long.scope.slice(0, 256) }),
    ).toBe(0);
    // The limit itself fits.
    expect((await store.claim(claimRequest({ scope: 'é'.repeat(256) }))).claimed).toBe(true);
  });

  it('a missing table is reported by name, with how to create it', async () => {
    const table = uniqueTableName('absent');
    const missing = createMariadbIdempotencyStore(db, { table });
    const error = await missing.claim(claimRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(MariadbIdempotencyTableMissingError);
    expect(error).toMatchObject({
      name: 'MariadbIdempotencyTableMissingError',
      table,
      message:
        `The idempotency table ${table} does not exist in this MariaDB database. Create it: add ` +
        '`mariadbIdempotencyKeysSchema().prismaModel` to a schema.prisma whose provider is "mysql" and run ' +
        '`prisma migrate dev`, or run `mariadbIdempotencyKeysSchema().ddl`. A table of another name: pass ' +
        '`{ table }` to createMariadbIdempotencyStore and mariadbIdempotencyKeysSchema alike.',
    });
    // The server's own error is kept as the cause (what the log shows).
    expect((error as Error).cause).toMatchObject({ code: 'P2010', message: expect.stringContaining('1146') });
    await expect(missing.deleteExpiredBatch(10)).rejects.toThrow(
      `The idempotency table ${table} does not exist`,
    );
    // Control: another failure is not mistaken for it.
    expect(
      await store.claim(claimRequest({ fingerprint: 'x'.repeat(65) })).catch((caught: unknown) => caught),
    ).not.toBeInstanceOf(MariadbIdempotencyTableMissingError);
  });

  it('a response larger than MEDIUMTEXT is refused with a typed error, and the key stays as it was', async () => {
    const request = claimRequest();
    await store.claim(request);
    const huge: StoredResponse = { kind: 'output', httpStatus: 200, body: 'x'.repeat(16_777_216) };
    const tooLarge = await store
      .complete(keyOf(request), request.owner, huge)
      .catch((caught: unknown) => caught);
    expect(tooLarge).toBeInstanceOf(MariadbResponseTooLargeError);
    expect(tooLarge).toMatchObject({
      name: 'MariadbResponseTooLargeError',
      bytes: 16_777_260,
      message:
        'The response to store is 16777260 bytes of JSON; the MariaDB key table holds at most 16777215 ' +
        '(MEDIUMTEXT). Return less from an idempotent procedure (e.g. an id to fetch the rest with).',
    });
    expect(await store.find(keyOf(request))).toMatchObject({ state: 'processing', response: null });
    const declined: StoredResponse = {
      kind: 'error',
      httpStatus: 402,
      code: 'X',
      message: 'é'.repeat(8_388_608),
    };
    const refused = claimRequest({ response: declined });
    await expect(store.claim(refused)).rejects.toThrow(/at most 16777215/);
    expect(await store.find(keyOf(refused))).toBeNull();
  });
});

describe('transaction (MariaDB)', () => {
  it('a duplicate waiting on the lock gets the record once the first commits (a locking read, not its snapshot)', async () => {
    const request = claimRequest();
    const first = await claimHeldOpen(store, request);
    const duplicate = store.transaction(
      async (tx) => {
        // A read first: the transaction's snapshot now predates the first claim's commit.
        await tx.$queryRawUnsafe('SELECT COUNT(*) FROM idempotency_keys');
        const result = await store.claim({ ...request, owner: randomUUID() }, tx);
        // Control: a plain read in this transaction still sees no row (its snapshot); the store's locking read did.
        const plain = await tx.$queryRawUnsafe<unknown[]>(
          `SELECT 1 FROM idempotency_keys WHERE ${where}`,
          request.scope,
          request.procedure,
          request.key,
        );
        expect(plain).toEqual([]);
        return result;
      },
      { lockTimeoutMs: 5_000, timeoutMs: 10_000 },
    );
    setTimeout(first.commit, 100);
    await first.committed;
    expect(await duplicate).toMatchObject({
      claimed: false,
      record: { state: 'completed', response: output },
    });
  });

  it('a duplicate waits on the lock up to lockTimeoutMs (4.5 s, rounded up to whole seconds), not just the 1 s minimum', async () => {
    const request = claimRequest();
    const first = await claimHeldOpen(store, request);
    const duplicate = store.transaction((tx) => store.claim({ ...request, owner: randomUUID() }, tx), {
      lockTimeoutMs: 4_500,
      timeoutMs: 10_000,
    });
    setTimeout(first.commit, 2_000);
    await first.committed;
    expect(await duplicate).toMatchObject({
      claimed: false,
      record: { state: 'completed', response: output },
    });
  });

  it("the lock wait bound is per statement: the pooled connection's session keeps its own innodb_lock_wait_timeout", async () => {
    const sessions = await store.transaction(
      async (tx) => {
        await store.claim(claimRequest(), tx);
        return tx.$queryRawUnsafe<Array<{ session: bigint; global: bigint }>>(
          'SELECT @@session.innodb_lock_wait_timeout AS session, @@global.innodb_lock_wait_timeout AS global',
        );
      },
      { lockTimeoutMs: 1_234, timeoutMs: 5_000 },
    );
    expect(Number(sessions[0]?.session)).toBe(Number(sessions[0]?.global));
  });
});

describe('cleanup (MariaDB)', () => {
  it('a deadlock victim (the cleanup crossing a transaction that locks rows the other way) is run again; control: the bare DELETE fails with 1213', async () => {
    await withKeyTable(mariadbRows(db, mariadb.scratch), async (table) => {
      const privateStore = createMariadbIdempotencyStore(db, { table });
      const rowLock = (key: string) =>
        `SELECT 1 FROM \`${table}\` WHERE scope = 'cleanup' AND \`procedure\` = 'expiredCompleted' AND \`key\` = '${key}' FOR UPDATE`;
      const lockWaits = async () => {
        // InnoDB refreshes INNODB_TRX only when it has not been read for 0.1 s: polled faster, it stays as it was
        // at the first read (before the cleanup waited) and the wait is never seen. Poll slower than that.
        await sleep(150);
        const [row] = await db.$queryRawUnsafe<Array<{ n: bigint }>>(
          "SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
          `%${table}%`,
        );
        return Number(row?.n ?? 0);
      };
      /**
       * A transaction that first writes many rows of another table (so InnoDB picks the other side as the victim,
       * without locking anything of the key table), locks key 2, waits until `cleanup` (which deletes in
       * expires_at order: key 1, then key 2) is blocked on it, then locks key 1: a cycle.
       */
      async function crossing(cleanup: () => Promise<number>) {
        await seedCleanupRows(mariadbRows(db, mariadb.scratch), table, 'expiredCompleted', 2);
        await seedCleanupRows(mariadbRows(db, mariadb.scratch), table, 'liveCompleted', 50);
        await db.$executeRawUnsafe(`CREATE TABLE IF NOT EXISTS \`${table}_weight\` (i INT NOT NULL)`);
        let result: Promise<number | unknown> = Promise.resolve(null);
        await db.$transaction(
          async (tx) => {
            await tx.$executeRawUnsafe(
              `INSERT INTO \`${table}_weight\` (i) VALUES ${Array.from({ length: 200 }, (_, i) => `(${i})`).join(', ')}`,
            );
            await tx.$queryRawUnsafe(rowLock('2'));
            result = cleanup().catch((error: unknown) => error);
            await waitUntil(async () => (await lockWaits()) > 0);
            await tx.$queryRawUnsafe(rowLock('1'));
          },
          { timeout: 20_000 },
        );
        return result;
      }

      expect(await crossing(() => privateStore.deleteExpiredBatch(10))).toBe(2);
      expect(await mariadbRows(db, mariadb.scratch).countsByProcedure(table)).toEqual({ liveCompleted: 50 });

      await db.$executeRawUnsafe(`DELETE FROM \`${table}\``);
      const control = await crossing(() =>
        db.$executeRawUnsafe(
          `DELETE FROM \`${table}\` WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT 10`,
        ),
      );
      expect(control).toBeInstanceOf(Error);
      expect(String((control as Error).message)).toMatch(/1213|Deadlock/);
      expect(privateStore.isLockTimeout(control)).toBe(true);
      await db.$executeRawUnsafe(`DROP TABLE \`${table}_weight\``);
    });
  });
});

describe('error recognition (MariaDB)', () => {
  const NO_SUCH_TABLE = 1146;
  const LOCK_WAIT_TIMEOUT = 1205;

  it('a missing table is known on each path MariaDB reports it: through Prisma (the adapter’s originalCode), from the driver itself (errno), or by the message text alone', async () => {
    const table = uniqueTableName('absent');
    const statement = `SELECT 1 FROM \`${table}\``;
    const prisma = (await db.$queryRawUnsafe(statement).catch((caught: unknown) => caught)) as Error;
    const driver = (await mariadb.scratch.execute([statement]).catch((caught: unknown) => caught)) as Error;
    // The shapes: Prisma's P2010 carries the number only inside meta.driverAdapterError's cause, the driver's
    // SqlError as its errno, and Prisma's message repeats the server's text.
    expect(prisma).toMatchObject({
      code: 'P2010',
      meta: { driverAdapterError: { cause: { originalCode: '1146' } } },
    });
    expect(driver).toMatchObject({ errno: NO_SUCH_TABLE });
    const textOnly = new Error(prisma.message);

    // By the number alone (no message pattern): through the wrapping, and on the driver's error.
    expect(hasMariadbErrno(prisma, NO_SUCH_TABLE)).toBe(true);
    expect(hasMariadbErrno(driver, NO_SUCH_TABLE)).toBe(true);
    // The text alone counts only with the pattern.
    expect(hasMariadbErrno(textOnly, NO_SUCH_TABLE)).toBe(false);
    expect(hasMariadbErrno(textOnly, NO_SUCH_TABLE, /Table '.*' doesn't exist/i)).toBe(true);
    // Control: none of them is another error.
    for (const error of [prisma, driver, textOnly])
      expect(hasMariadbErrno(error, LOCK_WAIT_TIMEOUT)).toBe(false);

    // Each is explained as the missing key table, keeping the server's error as its cause.
    for (const error of [prisma, driver, textOnly]) {
      const explained = await explainingMissingMariadbTable(table, () => Promise.reject(error)).catch(
        (caught: unknown) => caught,
      );
      expect(explained).toBeInstanceOf(MariadbIdempotencyTableMissingError);
      expect((explained as Error).cause).toBe(error);
    }
    // Control: another failure goes up as it is.
    const other = new Error("Unknown column 'x' in 'field list'");
    await expect(explainingMissingMariadbTable(table, () => Promise.reject(other))).rejects.toBe(other);
  });

  it('an error whose cause chain loops back on itself is walked once', () => {
    const outer = new Error('outer') as Error & { errno?: number };
    const inner = new Error('inner', { cause: outer }) as Error & { errno?: number };
    outer.cause = inner;
    expect(hasMariadbErrno(outer, NO_SUCH_TABLE, /doesn't exist/)).toBe(false);
    expect(store.isLockTimeout(outer)).toBe(false);
    // Control: a number anywhere in the loop is found.
    inner.errno = LOCK_WAIT_TIMEOUT;
    expect(store.isLockTimeout(outer)).toBe(true);
  });
});
