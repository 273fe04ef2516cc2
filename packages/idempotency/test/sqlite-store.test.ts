/**
 * The SQLite store on a real SQLite file through Prisma's better-sqlite3 adapter: the store contract every engine
 * keeps (support/store-contract.ts), then what is SQLite's own: times as fixed-width ISO-8601 text, the one
 * connection whose open transaction a bare statement would join (so the store never sends one), the exact cap
 * under one writer, and a missing table explained.
 */
import type { SqliteDatabase } from '@idem/db-sqlite';
import { createSqlitePrismaClient } from '@idem/db-sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createSqliteIdempotencyStore,
  type PrismaTransactionLike,
  SqliteIdempotencyTableMissingError,
} from '../src/sqlite/index.ts';
import {
  bindNamed,
  isSqliteBusy,
  isSqliteMissingTable,
  isTransactionStartTimeout,
} from '../src/sqlite/sql.ts';
import { deferred, sleep, uniqueScope } from './support/db.ts';
import { connectSqlite } from './support/sqlite-db.ts';
import { keyParams, NOW, nowPlus, sqliteRows, where } from './support/sqlite-rows.ts';
import { describeStoreContract, type StoreBackend } from './support/store-contract.ts';
import { claimRequest } from './support/store-fixtures.ts';

let db: SqliteDatabase;
/** A second client on the same file: reads beside the first client's open transaction (WAL). */
let observerDb: SqliteDatabase;
let store: ReturnType<typeof createSqliteIdempotencyStore<SqliteDatabase>>;

beforeAll(async () => {
  const connected = await connectSqlite();
  db = connected.db;
  observerDb = createSqlitePrismaClient({ file: connected.file });
  store = createSqliteIdempotencyStore(db);
});
afterAll(async () => {
  await observerDb.$disconnect();
  await db.$disconnect();
});

describeStoreContract(
  'SQLite',
  (): StoreBackend<PrismaTransactionLike<SqliteDatabase>> => ({
    ...sqliteRows(db),
    store,
    // The client's one connection is held by an open transaction: read on another client of the file.
    observer: createSqliteIdempotencyStore(observerDb),
    createStore: (options) => createSqliteIdempotencyStore(db, options),
    // Times are exact to the millisecond, but julianday() differences are floating-point days (≈ 50 µs of noise).
    durationTolerance: 0.001,
    // No schemas: a qualified name is refused.
    validTableNames: ['idempotency_keys'],
  }),
);

describe('times (SQLite)', () => {
  it('stores times as ISO-8601 UTC text with milliseconds: the fixed width that makes text order time order', async () => {
    const request = claimRequest();
    await store.claim(request);
    const rows = await db.$queryRawUnsafe<Array<{ created: string; expires: string; lease: string }>>(
      `select cast(created_at as text) as created, cast(expires_at as text) as expires,
              cast(locked_until as text) as lease
       from idempotency_keys where ${where}`,
      ...keyParams(request),
    );
    expect(rows).toHaveLength(1);
    for (const time of Object.values(rows[0] ?? {}))
      expect(time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/);
  });
});

describe('one connection (SQLite)', () => {
  it('a claim never runs inside another request’s open transaction (control: a bare query does, and is rolled back with it)', async () => {
    const holding = deferred();
    const opened = deferred();
    const request = claimRequest();
    const open = db
      .$transaction(async (tx) => {
        await tx.$executeRawUnsafe('select 1');
        opened.resolve();
        await holding.promise;
        throw new Error('roll back');
      })
      .catch(() => 'rolled back');
    await opened.promise;
    // Control: the adapter's one connection is inside the transaction, so a bare statement joins it.
    const bare = claimRequest();
    const bareInsert = db.$executeRawUnsafe(
      `insert into idempotency_keys (scope, procedure, key, fingerprint, state, created_at, expires_at)
       values (?, ?, ?, ?, 'completed', ${NOW}, ${nowPlus(60)})`,
      bare.scope,
      bare.procedure,
      bare.key,
      bare.fingerprint,
    );
    const claim = store.claim(request);
    await bareInsert;
    holding.resolve();
    expect(await open).toBe('rolled back');
    expect(await sqliteRows(db).rowCount(bare)).toBe(0);
    // The store's claim waited for the connection instead, and its row is there.
    expect(await claim).toEqual({ claimed: true, takeover: false });
    expect(await sqliteRows(db).rowCount(request)).toBe(1);
  });
});

describe('per-principal in-flight cap (SQLite)', () => {
  it('12 concurrent new keys of one principal under a cap of 3: exactly 3 claimed (one writer: the count is exact)', async () => {
    const scope = uniqueScope();
    const cap = { max: 3, retryAfterSeconds: 1 };
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, () => store.claim(claimRequest({ scope, inFlightCap: cap }))),
    );
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(3);
    expect(results.filter((result) => result.status === 'rejected')).toHaveLength(9);
    // Control: the same burst of one principal without the cap claims every key.
    const uncappedScope = uniqueScope();
    const uncapped = await Promise.all(
      Array.from({ length: 12 }, () => store.claim(claimRequest({ scope: uncappedScope }))),
    );
    expect(uncapped.filter((result) => result.claimed)).toHaveLength(12);
  });
});

describe('setup errors (SQLite)', () => {
  it('a missing table is reported by name, by the claim and by cleanup', async () => {
    const missing = createSqliteIdempotencyStore(db, { table: 'no_such_keys' });
    const error = await missing.claim(claimRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(SqliteIdempotencyTableMissingError);
    expect(error).toMatchObject({
      name: 'SqliteIdempotencyTableMissingError',
      table: 'no_such_keys',
      message:
        'The idempotency table no_such_keys does not exist in this SQLite database. Create it: add ' +
        '`sqliteIdempotencyKeysSchema().prismaModel` to a schema.prisma whose provider is "sqlite" and run ' +
        '`prisma migrate dev`, or run each of `sqliteIdempotencyKeysSchema().statements`.',
    });
    // SQLite's own error is kept as the cause (what the log shows).
    expect((error as Error).cause).toMatchObject({
      code: 'P2010',
      message: expect.stringContaining('no such table: no_such_keys'),
    });
    await expect(missing.deleteExpiredBatch(10)).rejects.toThrow(/no_such_keys does not exist/);
  });
});

describe('connection wait (SQLite)', () => {
  it('connectionWaitMs bounds how long the store waits for the client’s connection held by another transaction (a lock timeout); within it, the store waits', async () => {
    const holding = deferred();
    const opened = deferred();
    const open = db.$transaction(
      async (tx) => {
        await tx.$executeRawUnsafe('select 1');
        opened.resolve();
        await holding.promise;
      },
      { timeout: 10_000 },
    );
    await opened.promise;
    try {
      const impatient = createSqliteIdempotencyStore(db, { connectionWaitMs: 100 });
      const error = await impatient.claim(claimRequest()).catch((caught: unknown) => caught);
      expect(error).toMatchObject({ code: 'P2028' });
      expect(impatient.isLockTimeout(error)).toBe(true);
      // Control: a store that may wait longer than the holder keeps the connection gets it.
      const patient = createSqliteIdempotencyStore(db, { connectionWaitMs: 10_000 });
      const claim = patient.claim(claimRequest());
      await sleep(2_500);
      holding.resolve();
      expect(await claim).toEqual({ claimed: true, takeover: false });
    } finally {
      holding.resolve();
      await open;
    }
  });
});

describe('error recognition (SQLite)', () => {
  it('a missing table is known by each sign Prisma and the adapter give: the message, the adapter’s originalMessage, its kind', async () => {
    const prisma = (await db
      .$queryRawUnsafe('select 1 from no_such_keys')
      .catch((caught: unknown) => caught)) as Error & { meta: { driverAdapterError: { cause: object } } };
    const adapter = prisma.meta.driverAdapterError.cause;
    expect(prisma).toMatchObject({
      code: 'P2010',
      message: expect.stringContaining('no such table: no_such_keys'),
    });
    expect(adapter).toMatchObject({
      originalMessage: 'no such table: no_such_keys',
      kind: 'TableDoesNotExist',
    });
    expect(isSqliteMissingTable(prisma)).toBe(true);
    // Real errors carry several signs at once; each alone is enough (adapters and versions differ in which they keep).
    expect(isSqliteMissingTable(new Error(prisma.message))).toBe(true);
    expect(isSqliteMissingTable({ originalMessage: 'no such table: no_such_keys' })).toBe(true);
    expect(isSqliteMissingTable({ kind: 'TableDoesNotExist' })).toBe(true);
    // Prisma's error without its text: found under meta.driverAdapterError.
    expect(isSqliteMissingTable({ code: 'P2010', meta: prisma.meta })).toBe(true);
    // Control: another failure is none of them.
    const column = await db
      .$queryRawUnsafe('select no_such_column from idempotency_keys')
      .catch((caught: unknown) => caught);
    expect(isSqliteMissingTable(column)).toBe(false);
    expect(isSqliteMissingTable({ kind: 'ColumnNotFound', originalMessage: 'no such column: x' })).toBe(
      false,
    );
  });

  it('a busy database (another connection holds the write lock past busy_timeout) is a lock timeout, by each sign alone', async () => {
    const connected = await connectSqlite();
    const holder = connected.db;
    const waiter = createSqlitePrismaClient({ file: connected.file, busyTimeoutMs: 100 });
    const holding = deferred();
    const opened = deferred();
    const open = holder.$transaction(
      async (tx) => {
        await tx.$executeRawUnsafe(
          `insert into idempotency_keys (scope, procedure, key, fingerprint, state, created_at, expires_at)
           values ('s', 'p', 'k', 'f', 'completed', ${NOW}, ${nowPlus(60)})`,
        );
        opened.resolve();
        await holding.promise;
      },
      { timeout: 10_000 },
    );
    try {
      await opened.promise;
      const busy = (await createSqliteIdempotencyStore(waiter)
        .claim(claimRequest())
        .catch((caught: unknown) => caught)) as Error & { meta: { driverAdapterError: { cause: object } } };
      expect(busy).toMatchObject({ code: 'P2010', message: expect.stringContaining('database is locked') });
      expect(busy.meta.driverAdapterError.cause).toMatchObject({
        originalCode: 'SQLITE_BUSY',
        originalMessage: 'database is locked',
      });
      expect(isSqliteBusy(busy)).toBe(true);
      expect(store.isLockTimeout(busy)).toBe(true);
    } finally {
      holding.resolve();
      await open;
      await waiter.$disconnect();
      await holder.$disconnect();
    }
    // Each sign alone: the message text, the adapter's originalMessage, its originalCode, the driver's code,
    // the codes also as SQLite's extended ones (SQLITE_BUSY_SNAPSHOT: a stale read transaction's upgrade).
    for (const sign of [
      new Error('Raw query failed. Code: `SQLITE_BUSY`. Message: `database is locked`'),
      { originalMessage: 'database is locked' },
      { originalCode: 'SQLITE_BUSY' },
      { originalCode: 'SQLITE_BUSY_SNAPSHOT' },
      { code: 'SQLITE_BUSY' },
      { code: 'SQLITE_BUSY_SNAPSHOT' },
    ])
      expect(isSqliteBusy(sign)).toBe(true);
    // Control: other SQLite failures are not.
    for (const other of [
      { code: 'SQLITE_CORRUPT', message: 'database disk image is malformed' },
      { originalCode: 'SQLITE_ERROR', originalMessage: 'no such table: x' },
      { code: 'SQLITE_LOCKED_SHAREDCACHE' },
    ])
      expect(isSqliteBusy(other)).toBe(false);
  });

  it('Prisma’s “unable to start a transaction in the given time” is a lock timeout; its other P2028 (an expired transaction) is not', async () => {
    const holding = deferred();
    const opened = deferred();
    const open = db.$transaction(
      async (tx) => {
        await tx.$executeRawUnsafe('select 1');
        opened.resolve();
        await holding.promise;
      },
      { timeout: 10_000 },
    );
    await opened.promise;
    const startTimeout = await db
      .$transaction((tx) => tx.$executeRawUnsafe('select 1'), { maxWait: 100 })
      .catch((caught: unknown) => caught);
    holding.resolve();
    await open;
    expect(startTimeout).toMatchObject({ code: 'P2028' });
    expect(isTransactionStartTimeout(startTimeout)).toBe(true);
    expect(store.isLockTimeout(startTimeout)).toBe(true);

    const expired = await db
      .$transaction(
        async (tx) => {
          await sleep(300);
          await tx.$executeRawUnsafe('select 1');
        },
        { timeout: 100 },
      )
      .catch((caught: unknown) => caught);
    expect(expired).toMatchObject({ code: 'P2028', message: expect.stringContaining('expired transaction') });
    expect(isTransactionStartTimeout(expired)).toBe(false);
    expect(store.isLockTimeout(expired)).toBe(false);
    // The text alone, without Prisma's code, is not Prisma's.
    expect(isTransactionStartTimeout(new Error((startTimeout as Error).message))).toBe(false);
  });

  it('an error whose cause chain loops back on itself is walked once', () => {
    const outer = new Error('outer');
    const inner = new Error('inner', { cause: outer }) as Error & { code?: string };
    outer.cause = inner;
    expect(isSqliteMissingTable(outer)).toBe(false);
    expect(store.isLockTimeout(outer)).toBe(false);
    // Control: a sign anywhere in the loop is found.
    inner.code = 'SQLITE_BUSY';
    expect(store.isLockTimeout(outer)).toBe(true);
  });
});

describe('bindNamed (SQLite)', () => {
  it('binds each @name in order, a name used twice twice; a name without a value is refused', () => {
    expect(bindNamed('select @a, @b, @a', { a: 1, b: 'x' })).toEqual(['select ?, ?, ?', 1, 'x', 1]);
    expect(bindNamed('select @a', { a: null })).toEqual(['select ?', null]);
    expect(() => bindNamed('select @a, @missing', { a: 1 })).toThrow('SQL parameter @missing has no value');
  });
});
