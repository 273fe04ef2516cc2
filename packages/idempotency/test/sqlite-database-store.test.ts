/**
 * The SQLite store on a plain better-sqlite3 `Database` (`createBetterSqliteIdempotencyStore`, no Prisma): the
 * store contract every engine keeps (support/store-contract.ts), then what the client adds on its one
 * synchronous connection — a bare statement waits for an open transaction instead of joining it, a transaction
 * past its timeout is rolled back and its later statements refused, a transaction whose COMMIT failed leaves
 * nothing open, and the waits (for the connection, for another process's write lock) are lock timeouts. Each
 * protection with a control on the bare driver.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createBetterSqliteIdempotencyStore,
  type PrismaTransactionLike,
  SqliteConnectionWaitError,
  type SqliteDatabaseExecutor,
  SqliteTransactionTimeoutError,
  sqliteDatabaseExecutor,
  TransactionClosedError,
} from '../src/sqlite/index.ts';
import { deferred } from './support/db.ts';
import { createSqliteKeyTable, scratchSqliteFile } from './support/sqlite-db.ts';
import { sqliteRows } from './support/sqlite-rows.ts';
import { describeStoreContract, type StoreBackend } from './support/store-contract.ts';
import { claimRequest } from './support/store-fixtures.ts';

let file: string;
let database: Database.Database;
/** A second connection to the same file: reads beside the first one's open transaction (WAL). */
let observerDatabase: Database.Database;
let executor: SqliteDatabaseExecutor;
let store: ReturnType<typeof createBetterSqliteIdempotencyStore>;

beforeAll(async () => {
  file = scratchSqliteFile();
  await createSqliteKeyTable(file);
  database = new Database(file);
  observerDatabase = new Database(file);
  executor = sqliteDatabaseExecutor(database);
  store = createBetterSqliteIdempotencyStore(database);
});
afterAll(() => {
  observerDatabase?.close();
  database?.close();
});

describeStoreContract(
  'SQLite on a better-sqlite3 Database',
  (): StoreBackend<PrismaTransactionLike<SqliteDatabaseExecutor>> => ({
    ...sqliteRows(executor),
    store,
    observer: createBetterSqliteIdempotencyStore(observerDatabase),
    createStore: (options) => createBetterSqliteIdempotencyStore(database, options),
    durationTolerance: 0.001,
    validTableNames: ['idempotency_keys'],
  }),
);

/** A table of effects of its own, on a fresh file (the tests below change the connection's state). */
function freshDatabase(options: { timeout?: number } = {}) {
  const path = scratchSqliteFile();
  const db = new Database(path, options);
  db.pragma('journal_mode = wal');
  db.exec('create table effects (id text not null)');
  return {
    db,
    path,
    count: () => (db.prepare('select count(*) as n from effects').get() as { n: number }).n,
  };
}

describe('one connection (better-sqlite3)', () => {
  it('a bare statement sent while a transaction is open waits for its end and is not rolled back with it (CONTROL: the bare driver’s statement joins it)', async () => {
    const { db, count } = freshDatabase();
    const client = sqliteDatabaseExecutor(db);
    const inside = deferred();
    const rollBack = deferred();
    const transaction = client
      .$transaction(async (tx) => {
        await (tx as SqliteDatabaseExecutor).$executeRawUnsafe('insert into effects (id) values (?)', 'in');
        inside.resolve();
        await rollBack.promise;
        throw new Error('roll back');
      })
      .catch((error: unknown) => error);
    await inside.promise;
    const bare = client.$executeRawUnsafe('insert into effects (id) values (?)', 'bare');
    expect(db.inTransaction).toBe(true);
    rollBack.resolve();
    expect(await transaction).toEqual(new Error('roll back'));
    expect(await bare).toBe(1);
    expect(count()).toBe(1);
    expect(db.prepare('select id from effects').all()).toEqual([{ id: 'bare' }]);

    // CONTROL: the same statement on the driver itself runs inside the open transaction and goes with it.
    const insideAgain = deferred();
    const rollBackAgain = deferred();
    const again = client
      .$transaction(async () => {
        insideAgain.resolve();
        await rollBackAgain.promise;
        throw new Error('roll back');
      })
      .catch(() => {});
    await insideAgain.promise;
    db.prepare('insert into effects (id) values (?)').run('joined');
    rollBackAgain.resolve();
    await again;
    expect(db.prepare('select id from effects order by id').all()).toEqual([{ id: 'bare' }]);
    db.close();
  });

  it('past its timeout: rolled back, the callback’s later statement refused, nothing of it commits (CONTROL: on the bare driver that statement commits alone)', async () => {
    const { db, count } = freshDatabase();
    const client = sqliteDatabaseExecutor(db);
    const late = deferred();
    const lateStatement = deferred<{ sent: PromiseLike<number> }>();
    const transaction = client.$transaction(
      async (tx) => {
        const on = tx as SqliteDatabaseExecutor;
        await on.$executeRawUnsafe('insert into effects (id) values (?)', 'first');
        await late.promise;
        const statement = on.$executeRawUnsafe('insert into effects (id) values (?)', 'late');
        lateStatement.resolve({ sent: statement });
        await statement;
      },
      { timeout: 50 },
    );
    await expect(transaction).rejects.toBeInstanceOf(SqliteTransactionTimeoutError);
    late.resolve();
    const { sent } = await lateStatement.promise;
    await expect(sent).rejects.toBeInstanceOf(TransactionClosedError);
    expect(db.inTransaction).toBe(false);
    expect(count()).toBe(0);

    // CONTROL: BEGIN, a statement, ROLLBACK (what a timeout sends), then the callback's next statement.
    db.exec('BEGIN');
    db.prepare('insert into effects (id) values (?)').run('first');
    db.exec('ROLLBACK');
    db.prepare('insert into effects (id) values (?)').run('late');
    expect(db.prepare('select id from effects').all()).toEqual([{ id: 'late' }]);
    db.close();
  });

  it('a COMMIT the database refuses (a deferred foreign key) leaves no transaction open: the next one runs (CONTROL: on the bare driver it stays open)', async () => {
    const { db, count } = freshDatabase();
    db.pragma('foreign_keys = on');
    db.exec(`create table parents (id text primary key);
             create table children (parent text references parents (id) deferrable initially deferred)`);
    const client = sqliteDatabaseExecutor(db);
    const orphan = client.$transaction(async (tx) => {
      await (tx as SqliteDatabaseExecutor).$executeRawUnsafe(
        'insert into children (parent) values (?)',
        'none',
      );
    });
    await expect(orphan).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_FOREIGNKEY' });
    expect(db.inTransaction).toBe(false);
    await client.$transaction(async (tx) => {
      await (tx as SqliteDatabaseExecutor).$executeRawUnsafe('insert into effects (id) values (?)', 'next');
    });
    expect(count()).toBe(1);

    // CONTROL: the same refused COMMIT on the driver leaves the transaction open for whatever comes next.
    db.exec('BEGIN');
    db.prepare('insert into children (parent) values (?)').run('none');
    expect(() => db.exec('COMMIT')).toThrow(/FOREIGN KEY/);
    expect(db.inTransaction).toBe(true);
    db.exec('ROLLBACK');
    db.close();
  });
});

describe('waits (better-sqlite3)', () => {
  it('a transaction that gets no turn within maxWait fails with SqliteConnectionWaitError, a lock timeout; the turn passes on', async () => {
    const { db, count } = freshDatabase();
    const client = sqliteDatabaseExecutor(db);
    const keyStore = createBetterSqliteIdempotencyStore(db);
    const held = deferred();
    const release = deferred();
    const holding = client.$transaction(async () => {
      held.resolve();
      await release.promise;
    });
    await held.promise;
    const waiting = client.$transaction(async () => {}, { maxWait: 30 }).catch((error: unknown) => error);
    const error = await waiting;
    expect(error).toBeInstanceOf(SqliteConnectionWaitError);
    expect(keyStore.isLockTimeout(error)).toBe(true);
    // A transaction queued after the one that gave up still gets its turn once the holder ends.
    const after = client.$transaction(async (tx) => {
      await (tx as SqliteDatabaseExecutor).$executeRawUnsafe('insert into effects (id) values (?)', 'after');
    });
    release.resolve();
    await holding;
    await after;
    expect(count()).toBe(1);
    db.close();
  });

  it('another connection holding the write lock past busy_timeout: SQLITE_BUSY, a lock timeout for the store; nothing claimed', async () => {
    const path = scratchSqliteFile();
    await createSqliteKeyTable(path);
    const writer = new Database(path);
    const db = new Database(path, { timeout: 50 });
    const keyStore = createBetterSqliteIdempotencyStore(db);
    writer.exec('BEGIN IMMEDIATE');
    const request = claimRequest();
    const error = await keyStore.claim(request).catch((caught: unknown) => caught);
    writer.exec('ROLLBACK');
    expect(error).toMatchObject({ code: 'SQLITE_BUSY' });
    expect(keyStore.isLockTimeout(error)).toBe(true);
    expect(await keyStore.find(request)).toBeNull();
    expect(await keyStore.claim(request)).toEqual({ claimed: true, takeover: false });
    writer.close();
    db.close();
  });
});
