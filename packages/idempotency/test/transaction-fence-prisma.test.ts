/**
 * A statement of the procedure that Prisma's transaction timeout overtook, on each store, through the real
 * lifecycle (`handleTransactional`: claim, the procedure, completion, commit, then a retry with the same key)
 * and a real Prisma client.
 *
 * Prisma checks that an interactive transaction is open once per operation, then sends all of the operation's
 * statements on the driver adapter's transaction object. The procedure's operation here is an upsert that
 * Prisma sends as two statements: a SELECT, then — on its answer — the INSERT. The SELECT's answer comes back
 * after the transaction timeout (a test-side wrapper holds it back, as a slow server or network would); the
 * timeout's ROLLBACK has been sent meanwhile and the connection handed back (SQLite's: its lock released); the
 * upsert's INSERT follows — on a connection no longer in any transaction. A retry then finds no key and runs the procedure again.
 *
 * The effect is a row in the key table (the one model all three test clients have) under a scope of its own,
 * tagged by attempt in `procedure`: exactly one attempt's row in the end is exactly-once.
 *
 * Each case has its control: the same client without `withTransactionFence`.
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient, pgAdapter } from '@idem/db';
import { createSqlitePrismaClient, type SqliteDatabase } from '@idem/db-sqlite';
import { createMariadbPrismaClient, createScratchMariadb, type ScratchMariadb } from '@idem/mariadb-test-db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import type { HandledRequest, IdempotentRequest } from '../src/core/request.ts';
import type { IdempotencyStore } from '../src/core/store.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import { fingerprintRequest } from '../src/index.ts';
import {
  createMariadbIdempotencyStore,
  mariadbIdempotencyKeysSchema,
  withTransactionFence as withMariadbFence,
} from '../src/mariadb/index.ts';
import {
  createPrismaIdempotencyStore,
  TransactionClosedError,
  withIdempotencyFastPath,
  withTransactionFence,
} from '../src/prisma/index.ts';
import {
  createSqliteIdempotencyStore,
  withTransactionFence as withSqliteFence,
} from '../src/sqlite/index.ts';
import { fencedTransaction } from '../src/stores/transaction-fence.ts';
import { databaseUrl, sleep, uniqueScope } from './support/db.ts';
import { createSqliteKeyTable, scratchSqliteFile } from './support/sqlite-db.ts';
import { output } from './support/store-fixtures.ts';

/** Prisma's transaction timeout is timeoutMs + lockTimeoutMs = 2 s. */
const options = resolveOptions({ lockTimeoutMs: 1_000, transactionTimeoutMs: 1_000 });
/** How late the upsert's SELECT is answered: well past the timeout. */
const LATE_MS = 3_000;

type Tag = 'first' | 'retry';
/** Rows of the effect, by the attempt that wrote them. */
type Effects = Record<string, number>;

interface Attempts {
  first: HandledRequest<Tag> | Error;
  /** What the procedure's upsert answered in the first attempt (a row, or the error it was refused with). */
  firstWrite: unknown;
  afterFirst: { effects: Effects; keyRows: number };
  retry: HandledRequest<Tag> | Error;
  afterRetry: { effects: Effects; keyRows: number };
}

/** What a store's case needs: the store, the procedure's effect through `tx`, and the rows as committed. */
interface Case<TTx> {
  store: IdempotencyStore<TTx>;
  /** The effect: an upsert of one row, which Prisma sends as a SELECT and then an INSERT. */
  upsert(tx: TTx, scope: string, tag: Tag): Promise<unknown>;
  /** Committed rows of `scope` by `procedure`. */
  rows(scope: string): Promise<Effects>;
  /** The next SELECT on a transaction is answered `LATE_MS` late. */
  answerNextLate(): void;
}

/** The first attempt (its upsert's SELECT answered late), then a retry with the same key, each in full. */
async function overtaken<TTx>(subject: Case<TTx>): Promise<Attempts> {
  const request: IdempotentRequest = {
    scope: uniqueScope(),
    procedure: 'orders.place',
    key: randomUUID(),
    fingerprint: fingerprintRequest('orders.place', { n: 1 }),
  };
  const effectScope = `effect:${request.scope}`;
  const observed = async () => ({
    effects: await subject.rows(effectScope),
    keyRows: (await subject.rows(request.scope))[request.procedure] ?? 0,
  });
  const failure = (error: unknown) => (error instanceof Error ? error : new Error(String(error)));

  let firstWrite: unknown = 'not sent';
  const first = await handleTransactional(subject.store, options, request, async (tx) => {
    subject.answerNextLate();
    firstWrite = await subject.upsert(tx, effectScope, 'first').catch((error: unknown) => error);
    if (firstWrite instanceof Error) throw firstWrite;
    return { result: 'first' as const, response: output };
  }).catch(failure);
  const afterFirst = await observed();
  const retry = await handleTransactional(subject.store, options, request, async (tx) => {
    await subject.upsert(tx, effectScope, 'retry');
    return { result: 'retry' as const, response: output };
  }).catch(failure);
  return { first, firstWrite, afterFirst, retry, afterRetry: await observed() };
}

/** The upsert's arguments: a `where` that matches nothing, so Prisma reads first and then inserts `create`. */
function upsertOf<TValue, TExtra extends object>(
  scope: string,
  tag: Tag,
  value: (text: string) => TValue,
  extra: TExtra,
) {
  const row = { scope: value(scope), procedure: value(tag) };
  return {
    where: { scope_procedure_key: { ...row, key: value(`absent:${randomUUID()}`) } },
    create: { ...row, key: value(randomUUID()), fingerprint: '0'.repeat(64), state: 'completed', ...extra },
    update: { replayCount: 0 },
  };
}
const inAnHour = () => new Date(Date.now() + 3_600_000);
const tally = (rows: Array<{ tag: string; n: bigint | number }>) =>
  Object.fromEntries(rows.map(({ tag, n }) => [tag, Number(n)]));

/** The fault: the INSERT ran after the ROLLBACK and committed alone, and the retry ran the procedure again. */
function expectEffectCommittedAlone(control: Attempts) {
  expect(control.firstWrite).not.toBeInstanceOf(Error);
  expect(control.first).toBeInstanceOf(Error);
  expect(control.afterFirst).toEqual({ effects: { first: 1 }, keyRows: 0 });
  expect(control.retry).toEqual({ kind: 'executed', result: 'retry' });
  expect(control.afterRetry).toEqual({ effects: { first: 1, retry: 1 }, keyRows: 1 });
}

/** Fenced: the INSERT was refused, not sent; nothing of the first attempt committed; the retry ran once. */
function expectRefusedAndRunOnce(fenced: Attempts) {
  expect(fenced.firstWrite).toBeInstanceOf(TransactionClosedError);
  expect(fenced.first).toBeInstanceOf(TransactionClosedError);
  expect(fenced.afterFirst).toEqual({ effects: {}, keyRows: 0 });
  expect(fenced.retry).toEqual({ kind: 'executed', result: 'retry' });
  expect(fenced.afterRetry).toEqual({ effects: { retry: 1 }, keyRows: 1 });
}

describe('a statement of the procedure overtaken by the transaction timeout', { timeout: 60_000 }, () => {
  describe('Postgres (the Prisma store)', () => {
    async function attempts(setup: 'unfenced' | 'fenced' | 'fast path') {
      const late = answeringLate();
      const slow = late.wrap(pgAdapter({ connectionString: databaseUrl(), max: 2 }));
      const adapter =
        setup === 'fast path'
          ? withIdempotencyFastPath(slow)
          : setup === 'fenced'
            ? withTransactionFence(slow)
            : slow;
      const db = createPrismaClient({ adapter });
      try {
        return await overtaken({
          store: createPrismaIdempotencyStore(db, setup === 'fast path' ? { fastPath: adapter } : {}),
          upsert: (tx, scope, tag) =>
            tx.idempotencyKey.upsert(upsertOf(scope, tag, String, { expiresAt: inAnHour() })),
          rows: async (scope) =>
            tally(
              await db.$queryRawUnsafe(
                `select procedure as tag, count(*)::int as n from idempotency_keys where scope = $1
                 group by procedure`,
                scope,
              ),
            ),
          answerNextLate: late.answerNextLate,
        });
      } finally {
        await db.$disconnect();
      }
    }

    it('control: without the fence the INSERT runs after the ROLLBACK, commits alone, and the retry runs again', async () => {
      expectEffectCommittedAlone(await attempts('unfenced'));
    });

    it('with withTransactionFence the INSERT is refused, and the effect happens once', async () => {
      expectRefusedAndRunOnce(await attempts('fenced'));
    });

    it('the fast path has the same fence built in', async () => {
      expectRefusedAndRunOnce(await attempts('fast path'));
    });
  });

  describe('MariaDB', () => {
    let scratch: ScratchMariadb;
    beforeAll(async () => {
      scratch = await createScratchMariadb();
      await scratch.execute(mariadbIdempotencyKeysSchema().statements);
    });
    afterAll(async () => {
      await scratch?.drop();
    });

    async function attempts(fenced: boolean) {
      const late = answeringLate();
      const db = createMariadbPrismaClient(scratch.url, 2, (adapter) => {
        const slow = late.wrap(adapter);
        return fenced ? withMariadbFence(slow) : slow;
      });
      const bytes = (text: string) => new TextEncoder().encode(text);
      try {
        return await overtaken({
          store: createMariadbIdempotencyStore(db),
          upsert: (tx, scope, tag) =>
            tx.idempotencyKey.upsert(
              upsertOf(scope, tag, bytes, { createdAt: new Date(), expiresAt: inAnHour() }),
            ),
          rows: async (scope) =>
            tally(
              await db.$queryRawUnsafe(
                'SELECT CAST(`procedure` AS CHAR) AS tag, COUNT(*) AS n FROM idempotency_keys WHERE scope = ? GROUP BY `procedure`',
                scope,
              ),
            ),
          answerNextLate: late.answerNextLate,
        });
      } finally {
        await db.$disconnect();
      }
    }

    it('control: without the fence the INSERT runs after the ROLLBACK, commits alone, and the retry runs again', async () => {
      expectEffectCommittedAlone(await attempts(false));
    });

    it('with withTransactionFence the INSERT is refused, and the effect happens once', async () => {
      expectRefusedAndRunOnce(await attempts(true));
    });
  });

  describe('SQLite', () => {
    let file: string;
    beforeAll(async () => {
      file = scratchSqliteFile();
      await createSqliteKeyTable(file);
    });

    async function attemptsOn(db: SqliteDatabase, answerNextLate: () => void) {
      try {
        return await overtaken({
          store: createSqliteIdempotencyStore(db),
          upsert: (tx, scope, tag) =>
            tx.idempotencyKey.upsert(
              upsertOf(scope, tag, String, { createdAt: new Date(), expiresAt: inAnHour() }),
            ),
          rows: async (scope) =>
            tally(
              await db.$queryRawUnsafe(
                'select procedure as tag, count(*) as n from idempotency_keys where scope = ? group by procedure',
                scope,
              ),
            ),
          answerNextLate,
        });
      } finally {
        await db.$disconnect();
      }
    }

    async function attempts(fenced: boolean) {
      const late = answeringLate();
      const db = createSqlitePrismaClient({
        file,
        wrapAdapter: (adapter) => {
          const slow = late.wrap(adapter);
          return fenced ? withSqliteFence(slow) : slow;
        },
      });
      return attemptsOn(db, late.answerNextLate);
    }

    it('control: without the fence the INSERT runs after the ROLLBACK, commits alone, and the retry runs again', async () => {
      expectEffectCommittedAlone(await attempts(false));
    });

    it('with withTransactionFence the INSERT is refused, and the effect happens once', async () => {
      expectRefusedAndRunOnce(await attempts(true));
    });

    // Why SQLite is not exposed through Prisma's better-sqlite3 adapter today: the driver is synchronous, so an
    // operation's statements run back to back, and Prisma's timer cannot fire between two of them. Here the
    // first attempt's INSERT itself takes LATE_MS (a trigger blocks the thread): the timeout passes during it,
    // and yet the operation, its key and its completion commit or roll back as one.
    it('on the synchronous driver a slow statement is not overtaken: the effect commits with its key or not at all', async () => {
      const slowFile = scratchSqliteFile();
      await createSqliteKeyTable(slowFile);
      const setup = createSqlitePrismaClient({ file: slowFile });
      try {
        await setup.$executeRawUnsafe(
          `create trigger slow_effect before insert on idempotency_keys
           when new.procedure = 'first' and new.scope like 'effect:%'
           begin select sleep_ms(${LATE_MS}); end`,
        );
      } finally {
        await setup.$disconnect();
      }
      const db = createSqlitePrismaClient({ file: slowFile, wrapAdapter: withSleepFunction });
      const run = await attemptsOn(db, () => {});
      const total = (effects: Effects) => Object.values(effects).reduce((sum, n) => sum + n, 0);
      expect(run.firstWrite).not.toBeInstanceOf(Error);
      expect(total(run.afterFirst.effects)).toBe(run.afterFirst.keyRows);
      expect(total(run.afterRetry.effects)).toBe(1);
      expect(run.afterRetry.keyRows).toBe(1);
    });
  });
});

describe('the fence itself', () => {
  /** An adapter transaction that records what reaches it. */
  function recording() {
    const sent: string[] = [];
    const transaction = {
      provider: 'postgres',
      adapterName: 'recording',
      options: { usePhantomQuery: false },
      queryRaw: async (query: { sql: string }) => {
        sent.push(query.sql);
        return { columnNames: [], columnTypes: [], rows: [] };
      },
      executeRaw: async (query: { sql: string }) => {
        sent.push(query.sql);
        return 0;
      },
      createSavepoint: async (name: string) => {
        sent.push(`SAVEPOINT ${name}`);
      },
      commit: async () => {
        sent.push('commit()');
      },
      rollback: async () => {
        sent.push('rollback()');
      },
    };
    return { transaction, sent };
  }
  const statement = (sql: string) => ({ sql, args: [], argTypes: [] });

  it('refuses every statement once rollback() or commit() was called; those two always go through', async () => {
    for (const end of ['rollback', 'commit'] as const) {
      const { transaction, sent } = recording();
      const fenced = fencedTransaction(transaction);
      await fenced.executeRaw(statement('insert 1'));
      await fenced[end]();
      await expect(fenced.executeRaw(statement('insert 2'))).rejects.toBeInstanceOf(TransactionClosedError);
      await expect(fenced.queryRaw(statement('select 1'))).rejects.toBeInstanceOf(TransactionClosedError);
      const savepoints = fenced as typeof fenced & { createSavepoint(name: string): Promise<void> };
      await expect(savepoints.createSavepoint('s1')).rejects.toBeInstanceOf(TransactionClosedError);
      await fenced.rollback();
      expect(sent).toEqual(['insert 1', `${end}()`, 'rollback()']);
    }
  });

  it('ends the transaction with the COMMIT or ROLLBACK statement itself, not with ROLLBACK TO SAVEPOINT', async () => {
    const { transaction, sent } = recording();
    const fenced = fencedTransaction(transaction);
    await fenced.executeRaw(statement('ROLLBACK TO SAVEPOINT s1'));
    await fenced.executeRaw(statement('insert 1'));
    await fenced.executeRaw(statement('ROLLBACK'));
    await expect(fenced.executeRaw(statement('insert 2'))).rejects.toBeInstanceOf(TransactionClosedError);
    await fenced.rollback(); // Prisma hands the connection back after its ROLLBACK statement
    expect(sent).toEqual(['ROLLBACK TO SAVEPOINT s1', 'insert 1', 'ROLLBACK', 'rollback()']);
  });

  it('wraps a factory once: a fenced one, or the fast path, is returned as it is', () => {
    const factory = pgAdapter({ connectionString: databaseUrl(), max: 1 });
    const fenced = withTransactionFence(factory);
    expect(fenced).not.toBe(factory);
    expect(withTransactionFence(fenced)).toBe(fenced);
    const fast = withIdempotencyFastPath(factory);
    expect(withTransactionFence(fast)).toBe(fast);
  });

  it("runs the factory's other methods on the factory itself (its settings are private fields)", async () => {
    let fenced: { connectToShadowDb(): Promise<{ dispose(): Promise<void> }> } | undefined;
    const db = createSqlitePrismaClient({
      file: ':memory:',
      wrapAdapter: (adapter) => {
        const wrapped = withSqliteFence(adapter);
        fenced = wrapped;
        return wrapped;
      },
    });
    try {
      const shadow = await fenced?.connectToShadowDb();
      expect(shadow).toBeDefined();
      await shadow?.dispose();
    } finally {
      await db.$disconnect();
    }
  });
});

/** The slice of a driver adapter factory (and its adapter, and their transactions) the late answer wraps. */
interface Factory {
  connect(): Promise<object>;
}
interface Queryable {
  queryRaw(query: unknown): Promise<unknown>;
}

/**
 * A wrapper for a driver adapter factory under which, once `answerNextLate()` was called, the next SELECT sent
 * on a transaction runs at once but is answered `LATE_MS` later — what Prisma sees of a slow statement.
 */
function answeringLate() {
  let armed = false;
  const lateTransaction = (transaction: Queryable): Queryable =>
    new Proxy(transaction, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property);
        if (typeof value !== 'function') return value;
        if (property !== 'queryRaw') return (...args: unknown[]) => Reflect.apply(value, target, args);
        return async (query: { sql: string }) => {
          const late = armed && /^\s*select/i.test(query.sql);
          if (late) armed = false;
          const answer: unknown = await Reflect.apply(value, target, [query]);
          if (late) await sleep(LATE_MS);
          return answer;
        };
      },
    });
  return {
    answerNextLate() {
      armed = true;
    },
    wrap<TFactory extends Factory>(factory: TFactory): TFactory {
      return new Proxy(factory, {
        get(target, property) {
          const value: unknown = Reflect.get(target, property);
          if (property !== 'connect' || typeof value !== 'function') return value;
          return async () => {
            const adapter = (await Reflect.apply(value, target, [])) as {
              startTransaction(...args: unknown[]): Promise<Queryable>;
            };
            const wrapped: object = new Proxy(adapter, {
              get(inner, name) {
                const member: unknown = Reflect.get(inner, name);
                if (typeof member !== 'function') return member;
                if (name !== 'startTransaction')
                  return (...args: unknown[]) => Reflect.apply(member, inner, args);
                // On the `this` it is given, as the fast path starts it (on an adapter of its own making).
                return async function startTransaction(this: unknown, ...args: unknown[]) {
                  const self = this === undefined || this === wrapped ? inner : this;
                  return lateTransaction((await Reflect.apply(member, self, args)) as Queryable);
                };
              },
            });
            return wrapped;
          };
        },
      });
    },
  };
}

/** The connection's better-sqlite3 database, as Prisma's adapter holds it. */
interface SqliteConnection {
  client: { function(name: string, fn: (ms: bigint) => number): void };
}

/** `factory`, whose connection has `sleep_ms(ms)`: it blocks the thread, as every better-sqlite3 statement does. */
function withSleepFunction<TFactory extends Factory>(factory: TFactory): TFactory {
  return new Proxy(factory, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (property !== 'connect' || typeof value !== 'function') return value;
      return async () => {
        const adapter = (await Reflect.apply(value, target, [])) as SqliteConnection;
        adapter.client.function('sleep_ms', (ms) => {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(ms));
          return 0;
        });
        return adapter;
      };
    },
  });
}
