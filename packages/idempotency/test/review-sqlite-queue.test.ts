/**
 * Review: the better-sqlite3 executor's one-connection queue and its fence, attacked — the order of waiters when
 * one gives up, never two transactions on the connection at once, a callback that throws synchronously, a statement
 * error the callback survives, and a statement error that SQLite answers by rolling the whole transaction back
 * (a trigger's RAISE(ROLLBACK)): the callback's later statements must not run outside any transaction.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  SqliteConnectionWaitError,
  type SqliteDatabaseExecutor,
  sqliteDatabaseExecutor,
  TransactionClosedError,
} from '../src/sqlite/index.ts';
import { deferred, sleep } from './support/db.ts';
import { scratchSqliteFile } from './support/sqlite-db.ts';

function freshDatabase() {
  const db = new Database(scratchSqliteFile());
  db.pragma('journal_mode = wal');
  db.exec('create table effects (id text not null)');
  return {
    db,
    ids: () =>
      (db.prepare('select id from effects order by rowid').all() as Array<{ id: string }>).map((r) => r.id),
  };
}
const on = (tx: unknown) => tx as SqliteDatabaseExecutor;

describe('the queue (better-sqlite3)', () => {
  it('a waiter that gives up lets no later waiter overtake an earlier one, and never two transactions at once', async () => {
    const { db, ids } = freshDatabase();
    const client = sqliteDatabaseExecutor(db);
    let holding = 0;
    let most = 0;
    const release = deferred();
    const held = deferred();
    const tx = (id: string, maxWait: number, wait?: Promise<void>) =>
      client.$transaction(
        async (t) => {
          holding += 1;
          most = Math.max(most, holding);
          if (id === 'a') held.resolve();
          await on(t).$executeRawUnsafe('insert into effects (id) values (?)', id);
          if (wait) await wait;
          await sleep(5);
          holding -= 1;
        },
        { maxWait },
      );
    const a = tx('a', 1_000, release.promise);
    await held.promise;
    const b = tx('b', 20).catch((error: unknown) => error);
    const c = tx('c', 3_000);
    const d = tx('d', 10).catch((error: unknown) => error);
    const e = tx('e', 3_000);
    const bare = client.$executeRawUnsafe('insert into effects (id) values (?)', 'bare');
    expect(await b).toBeInstanceOf(SqliteConnectionWaitError);
    expect(await d).toBeInstanceOf(SqliteConnectionWaitError);
    release.resolve();
    await Promise.all([a, c, e, bare]);
    expect(ids()).toEqual(['a', 'c', 'e', 'bare']);
    expect(most).toBe(1);
    // Nothing stalls: the next turn is immediate.
    await client.$transaction(async () => {}, { maxWait: 50 });
    db.close();
  });

  it('two executors on one Database share its one connection: a second transaction waits, the first is not rolled back under it', async () => {
    const { db, ids } = freshDatabase();
    const first = sqliteDatabaseExecutor(db);
    const second = sqliteDatabaseExecutor(db);
    const inside = deferred();
    const finish = deferred();
    const one = first.$transaction(async (t) => {
      await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'one-a');
      inside.resolve();
      await finish.promise;
      await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'one-b');
    });
    await inside.promise;
    const two = second.$transaction(async (t) => {
      await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'two');
      throw new Error('two rolls back');
    });
    const bare = second.$executeRawUnsafe('insert into effects (id) values (?)', 'bare');
    await new Promise((resolve) => setTimeout(resolve, 20));
    finish.resolve();
    await expect(one).resolves.toBeUndefined();
    await expect(two).rejects.toThrow('two rolls back');
    await bare;
    expect(ids()).toEqual(['one-a', 'one-b', 'bare']);
    db.close();
  });

  it('a callback that throws synchronously rolls back and leaves the connection to the next transaction', async () => {
    const { db, ids } = freshDatabase();
    const client = sqliteDatabaseExecutor(db);
    const thrown = client.$transaction(((t: unknown) => {
      void on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'sync');
      throw new Error('sync');
    }) as never);
    await expect(thrown).rejects.toThrow('sync');
    expect(db.inTransaction).toBe(false);
    await client.$transaction(async (t) => {
      await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'next');
    });
    expect(ids()).toEqual(['next']);
    db.close();
  });

  it('a statement error the callback catches (a constraint) keeps the transaction: the rest commits with it', async () => {
    const { db, ids } = freshDatabase();
    db.exec("create table uniq (id text primary key); insert into uniq values ('x')");
    const client = sqliteDatabaseExecutor(db);
    await client.$transaction(async (t) => {
      await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'before');
      await on(t)
        .$executeRawUnsafe(`insert into uniq values ('x')`)
        .then(
          () => {},
          () => {},
        );
      await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'after');
    });
    expect(ids()).toEqual(['before', 'after']);
    db.close();
  });

  it('a statement error that rolled the whole transaction back (RAISE(ROLLBACK)): the callback’s later statements are refused, nothing commits alone', async () => {
    const { db, ids } = freshDatabase();
    db.exec(`create table guarded (id text);
             create trigger refuse before insert on guarded begin select raise(rollback, 'refused'); end;`);
    const client = sqliteDatabaseExecutor(db);
    let late: unknown;
    const transaction = client.$transaction(async (t) => {
      await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'before');
      await on(t)
        .$executeRawUnsafe('insert into guarded (id) values (?)', 'g')
        .then(
          () => {},
          () => {},
        );
      // SQLite has rolled back the transaction: this statement would run in autocommit and stay.
      late = await on(t)
        .$executeRawUnsafe('insert into effects (id) values (?)', 'after')
        .then(
          () => 'sent',
          (error: unknown) => error,
        );
    });
    await expect(transaction).rejects.toThrow();
    expect(ids()).toEqual([]);
    expect(late).toBeInstanceOf(TransactionClosedError);
    expect(db.inTransaction).toBe(false);

    // CONTROL: on the bare driver, the statement after the RAISE(ROLLBACK) commits alone.
    db.exec('BEGIN');
    db.prepare('insert into effects (id) values (?)').run('before');
    expect(() => db.prepare('insert into guarded (id) values (?)').run('g')).toThrow(/refused/);
    expect(db.inTransaction).toBe(false);
    db.prepare('insert into effects (id) values (?)').run('after');
    expect(ids()).toEqual(['after']);
    db.close();
  });
});

describe('statements as Prisma takes them (better-sqlite3)', () => {
  it('$queryRawUnsafe of a statement that returns no rows runs it and answers [] (Prisma does; the driver’s all() refuses it)', async () => {
    const { db, ids } = freshDatabase();
    const client = sqliteDatabaseExecutor(db);
    expect(await client.$queryRawUnsafe('insert into effects (id) values (?)', 'bare')).toEqual([]);
    await client.$transaction(async (t) => {
      expect(await on(t).$queryRawUnsafe('insert into effects (id) values (?)', 'in')).toEqual([]);
    });
    expect(ids()).toEqual(['bare', 'in']);
    // CONTROL: the driver's all() on such a statement throws.
    expect(() => db.prepare('insert into effects (id) values (?)').all('x')).toThrow(/does not return data/);
    db.close();
  });
});

describe('parameters as Prisma binds them (better-sqlite3)', () => {
  it('a Date parameter is bound as Prisma’s SQLite adapter binds it (ISO 8601, +00:00 — the store’s own time format), not refused', async () => {
    const { db } = freshDatabase();
    db.exec('create table times (at text)');
    const client = sqliteDatabaseExecutor(db);
    const at = new Date('2026-01-02T03:04:05.678Z');
    await client.$executeRawUnsafe('insert into times (at) values (?)', at);
    expect(db.prepare('select at from times').all()).toEqual([{ at: '2026-01-02T03:04:05.678+00:00' }]);
    // It compares with the store's clock text: strftime('%Y-%m-%dT%H:%M:%f+00:00').
    const [row] = await client.$queryRawUnsafe<Array<{ before: number }>>(
      `select ? < strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') as before`,
      at,
    );
    expect(row?.before).toBe(1);
    db.close();
  });
});

describe('bounds past a timer’s range (better-sqlite3)', () => {
  it('timeout and maxWait of Infinity (or past 2^31 − 1 ms) mean no bound, not 1 ms (Node clamps such a timer to 1 ms)', async () => {
    const { db, ids } = freshDatabase();
    const client = sqliteDatabaseExecutor(db);
    const held = deferred();
    const release = deferred();
    const holder = client.$transaction(
      async (t) => {
        await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'long');
        held.resolve();
        await release.promise;
      },
      { timeout: Number.POSITIVE_INFINITY },
    );
    await held.promise;
    const waiter = client.$transaction(
      async (t) => {
        await on(t).$executeRawUnsafe('insert into effects (id) values (?)', 'waited');
      },
      { maxWait: 3_000_000_000, timeout: 3_000_000_000 },
    );
    await sleep(30);
    release.resolve();
    await holder;
    await waiter;
    expect(ids()).toEqual(['long', 'waited']);
    db.close();
  });
});
