/**
 * The Postgres store on the fast path (`withIdempotencyFastPath`): its statements go straight to Prisma's pg
 * adapter, on the transaction Prisma opened. The whole store contract again, then what the fast path itself
 * must keep: the store's statements really skip Prisma's query path, they land in the request's transaction
 * (commit and roll back with the procedure's writes, also when the procedure opens a transaction of its own),
 * and a statement sent after Prisma closed the transaction never runs outside it.
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient, type Database, PrismaClient, pgAdapter } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordKey } from '../src/index.ts';
import { fastPathOf } from '../src/prisma/fast-path/adapter.ts';
import {
  createPrismaIdempotencyStore,
  idempotencyStatementName,
  type PrismaTransactionLike,
  withIdempotencyFastPath,
} from '../src/prisma/index.ts';
import { ownTableUrl } from './support/db.ts';
import { keepingTransactions } from './support/keeping-transactions.ts';
import { postgresRows } from './support/postgres-rows.ts';
import { describeStoreContract, type StoreBackend } from './support/store-contract.ts';
import { claimRequest, keyOf, output } from './support/store-fixtures.ts';

type Tx = PrismaTransactionLike<Database>;

let url: string;
let db: Database;
let adapter: ReturnType<typeof withIdempotencyFastPath<ReturnType<typeof pgAdapter>>>;
let store: ReturnType<typeof createPrismaIdempotencyStore<Database>>;
/** Every statement Prisma itself sent (its query events): the fast path's never appear here. */
const prismaQueries: string[] = [];

beforeAll(async () => {
  url = await ownTableUrl();
  adapter = withIdempotencyFastPath(
    pgAdapter({ connectionString: url, statementName: idempotencyStatementName }),
  );
  const client = new PrismaClient({ adapter, log: [{ emit: 'event', level: 'query' }] });
  client.$on('query', (event) => prismaQueries.push(event.query));
  db = client;
  store = createPrismaIdempotencyStore(db, { fastPath: adapter });
  await db.$executeRawUnsafe('create table effects (scope text not null, who text not null)');
});
afterAll(async () => {
  await db.$disconnect();
});

const where = 'scope = $1 and procedure = $2 and key = $3';
const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];
const rowCount = async (key: RecordKey) =>
  (
    await db.$queryRawUnsafe<Array<{ n: number }>>(
      `select count(*)::int as n from idempotency_keys where ${where}`,
      ...keyParams(key),
    )
  )[0]?.n;
const stateOf = async (key: RecordKey) =>
  (
    await db.$queryRawUnsafe<Array<{ state: string }>>(
      `select state from idempotency_keys where ${where}`,
      ...keyParams(key),
    )
  )[0]?.state ?? null;
const effectsOf = async (scope: string) =>
  (await db.$queryRawUnsafe<Array<{ who: string }>>('select who from effects where scope = $1', scope)).map(
    (row) => row.who,
  );

describeStoreContract(
  'Postgres (fast path)',
  (): StoreBackend<Tx> => ({
    ...postgresRows(db),
    store,
    observer: store,
    createStore: (options) => createPrismaIdempotencyStore(db, { ...options, fastPath: adapter }),
    durationTolerance: 0,
    validTableNames: ['idempotency_keys'],
  }),
);

describe('the fast path', () => {
  it("sends the store's statements past Prisma, in and out of transactions (control: the same store without it)", async () => {
    const before = prismaQueries.length;
    const request = claimRequest();
    await store.transaction(
      async (tx) => {
        await store.claim(request, tx);
        // The procedure's own statement, through Prisma, on the same transaction.
        await tx.$executeRawUnsafe('insert into effects (scope, who) values ($1, $2)', request.scope, 'p');
        await store.complete(keyOf(request), request.owner, output, tx);
      },
      { lockTimeoutMs: 1_000, timeoutMs: 5_000 },
    );
    const external = claimRequest();
    await store.claim(external);
    await store.renewLease?.(keyOf(external), external.owner, 30);
    await store.complete(keyOf(external), external.owner, output);
    await store.countReplay(keyOf(external), 1);
    const sent = prismaQueries.slice(before);
    expect(sent.filter((sql) => sql.includes('/* idem:'))).toEqual([]);
    // The transaction itself is Prisma's: it sent the COMMIT.
    expect(sent.filter((sql) => /^\s*commit/i.test(sql))).toHaveLength(1);
    expect(await stateOf(request)).toBe('completed');
    expect(await stateOf(external)).toBe('completed');

    const control = createPrismaIdempotencyStore(db);
    const other = claimRequest();
    const beforeControl = prismaQueries.length;
    await control.transaction((tx) => control.claim(other, tx), { lockTimeoutMs: 1_000, timeoutMs: 5_000 });
    await control.complete(keyOf(other), other.owner, output);
    expect(prismaQueries.slice(beforeControl).filter((sql) => sql.includes('/* idem:'))).toHaveLength(2);
  });

  it("puts the claim in the procedure's transaction: both commit, or both roll back", async () => {
    const committed = claimRequest();
    await store.transaction(
      async (tx) => {
        await store.claim(committed, tx);
        await tx.$executeRawUnsafe('insert into effects (scope, who) values ($1, $2)', committed.scope, 'a');
        await store.complete(keyOf(committed), committed.owner, output, tx);
      },
      { lockTimeoutMs: 1_000, timeoutMs: 5_000 },
    );
    expect([await stateOf(committed), await effectsOf(committed.scope)]).toEqual(['completed', ['a']]);

    const rolledBack = claimRequest();
    const failure = new Error('the procedure failed');
    await expect(
      store.transaction(
        async (tx) => {
          await store.claim(rolledBack, tx);
          // Seen inside the transaction by Prisma's own queries on it: the same connection.
          const [seen] = await tx.$queryRawUnsafe<Array<{ n: number }>>(
            `select count(*)::int as n from idempotency_keys where ${where}`,
            ...keyParams(rolledBack),
          );
          expect(seen?.n).toBe(1);
          await tx.$executeRawUnsafe(
            'insert into effects (scope, who) values ($1, $2)',
            rolledBack.scope,
            'b',
          );
          throw failure;
        },
        { lockTimeoutMs: 1_000, timeoutMs: 5_000 },
      ),
    ).rejects.toBe(failure);
    expect([await rowCount(rolledBack), await effectsOf(rolledBack.scope)]).toEqual([0, []]);
  });

  it('keeps the claim on the outer transaction when the procedure opens one of its own', async () => {
    const request = claimRequest();
    const failure = new Error('rolled back after the inner transaction committed');
    await expect(
      store.transaction(
        async (tx) => {
          await db.$transaction((inner) =>
            inner.$executeRawUnsafe(
              'insert into effects (scope, who) values ($1, $2)',
              request.scope,
              'inner',
            ),
          );
          await store.claim(request, tx);
          throw failure;
        },
        { lockTimeoutMs: 1_000, timeoutMs: 5_000 },
      ),
    ).rejects.toBe(failure);
    // The inner transaction committed on its own; the claim went down with the outer one.
    expect([await rowCount(request), await effectsOf(request.scope)]).toEqual([0, ['inner']]);
  });

  it('never sends a statement after Prisma closed the transaction (control: the raw adapter transaction does)', async () => {
    // The test's own wrapper keeps the adapter transaction Prisma opens, as a naive fast path would.
    const kept: Array<{
      executeRaw(query: { sql: string; args: unknown[]; argTypes: unknown[] }): Promise<number>;
    }> = [];
    const keeping = keepingTransactions(pgAdapter({ connectionString: url, max: 1 }), kept);
    const fast = withIdempotencyFastPath(keeping);
    const client = createPrismaClient({ adapter: fast });
    const late = createPrismaIdempotencyStore(client, { fastPath: fast });
    try {
      // Connected first, and a start bound (maxWait = timeoutMs) no loaded machine reaches: the transaction must
      // start and then time out — not fail to start, which would leave the completion below outside any
      // transaction for another reason (a CI run under load once did).
      await client.$queryRawUnsafe('select 1');
      const request = claimRequest();
      let closedTx: Tx | undefined;
      await expect(
        late.transaction(
          async (tx) => {
            await late.claim(request, tx);
            closedTx = tx;
            // Outlive the transaction's timeout (timeoutMs + lockTimeoutMs): wait until Prisma has begun to roll
            // it back (the fast path then refuses it), however late the timer fires on a loaded machine.
            while (fastPathOf(fast)?.executor(tx) !== undefined)
              await new Promise((resolve) => setTimeout(resolve, 20));
          },
          { lockTimeoutMs: 100, timeoutMs: 2_000 },
        ),
      ).rejects.toThrow(/expired|timeout|timed out/i);
      expect(closedTx).toBeDefined();
      // The late completion is refused, by Prisma, as a statement on a closed transaction.
      await expect(late.complete(keyOf(request), request.owner, output, closedTx)).rejects.toThrow(
        /transaction/i,
      );
      // Nothing landed: the claim was rolled back, and the completion ran nowhere.
      expect(await rowCount(request)).toBe(0);

      // Control: the same completion sent on the adapter transaction after Prisma closed it runs outside any
      // transaction, on the connection handed back to the pool — and commits on its own.
      await client.$executeRawUnsafe(
        `insert into idempotency_keys (scope, procedure, key, fingerprint, state, lease_owner, locked_until,
           created_at, expires_at) values ($1, $2, $3, $4, 'processing', $5::uuid, now() + interval '30 seconds',
           now(), now() + interval '1 hour')`,
        ...keyParams(request),
        request.fingerprint,
        request.owner,
      );
      const [raw] = kept;
      if (!raw) throw new Error('no adapter transaction was opened');
      const count = await raw.executeRaw({
        sql: `update idempotency_keys set state = 'completed' where ${where}`,
        args: keyParams(request),
        argTypes: keyParams(request).map(() => ({ scalarType: 'string', arity: 'scalar' })),
      });
      expect(count).toBe(1);
      expect(await stateOf(request)).toBe('completed');
    } finally {
      await client.$disconnect();
    }
  });

  it('goes through Prisma until the adapter is connected again after $disconnect', async () => {
    const fast = withIdempotencyFastPath(pgAdapter({ connectionString: url, max: 2 }));
    const client = createPrismaClient({ adapter: fast });
    const reconnecting = createPrismaIdempotencyStore(client, { fastPath: fast });
    try {
      const first = claimRequest();
      expect(await reconnecting.claim(first)).toEqual({ claimed: true, takeover: false });
      await client.$disconnect();
      // The disconnected adapter's pool is ended: nothing is sent to it.
      expect(fastPathOf(fast)?.executor(undefined)).toBeUndefined();
      const second = claimRequest();
      expect(await reconnecting.claim(second)).toEqual({ claimed: true, takeover: false });
      expect(await reconnecting.find(keyOf(first))).toMatchObject({
        state: 'processing',
        leaseOwner: first.owner,
      });
    } finally {
      await client.$disconnect();
    }
  });

  it('returns what Prisma returns: dates as Date, the record as the store reads it through Prisma', async () => {
    const request = claimRequest();
    await store.claim(request);
    await store.complete(keyOf(request), request.owner, output);
    const fast = await store.find(keyOf(request));
    const plain = await createPrismaIdempotencyStore(db).find(keyOf(request));
    expect(fast?.createdAt).toBeInstanceOf(Date);
    expect(fast).toEqual(plain);
  });

  it('an adapter that commits in commit() itself (no COMMIT statement) closes the fast path there', async () => {
    // Prisma's phantom-query adapters end a transaction by calling commit()/rollback() without sending COMMIT.
    const ended: string[] = [];
    const transaction = {
      provider: 'postgres',
      adapterName: 'phantom',
      options: { usePhantomQuery: true },
      queryRaw: async () => ({ columnNames: ['n'], columnTypes: [0], rows: [[1]] }),
      executeRaw: async () => 1,
      commit: async () => void ended.push('commit'),
      rollback: async () => void ended.push('rollback'),
    };
    const adapter = {
      provider: 'postgres',
      adapterName: 'phantom',
      queryRaw: transaction.queryRaw,
      executeRaw: transaction.executeRaw,
      startTransaction: async () => transaction,
    };
    const fast = withIdempotencyFastPath({
      provider: 'postgres',
      adapterName: 'phantom',
      connect: async () => adapter,
    });
    const path = fastPathOf(fast);
    const connected = await fast.connect();
    for (const end of ['commit', 'rollback'] as const) {
      const tx = {};
      await path?.run(async () => {
        const started = await connected.startTransaction();
        path.bind(tx);
        expect(await path.executor(tx)?.$queryRawUnsafe('select 1 as n')).toEqual([{ n: 1 }]);
        await started[end]();
      });
      expect(path?.executor(tx)).toBeUndefined();
    }
    expect(ended).toEqual(['commit', 'rollback']);
  });

  it('closes a transaction as soon as its COMMIT or ROLLBACK is sent, before the adapter is told', async () => {
    const sent: string[] = [];
    const transaction = {
      provider: 'postgres',
      adapterName: 'statements',
      queryRaw: async (_query: { sql: string }) => ({ columnNames: [], columnTypes: [], rows: [] }),
      executeRaw: async (query: { sql: string }) => {
        sent.push(query.sql);
        return 0;
      },
      commit: async () => {},
      rollback: async () => {},
      createSavepoint: async (name: string) => void sent.push(`savepoint ${name}`),
    };
    const adapter = { ...transaction, startTransaction: async () => transaction };
    const fast = withIdempotencyFastPath({
      provider: 'postgres',
      adapterName: 'statements',
      connect: async () => adapter,
    });
    const path = fastPathOf(fast);
    const connected = await fast.connect();
    // A transaction the store never bound (started outside its slot) has no fast path.
    expect(path?.executor({})).toBeUndefined();
    for (const end of ['COMMIT', '  rollback', 'END', 'abort work']) {
      const tx = {};
      await path?.run(async () => {
        const started = (await connected.startTransaction()) as typeof transaction;
        path.bind(tx);
        // Other statements and methods pass through and keep it open.
        await started.executeRaw({ sql: "update notes set text = 'commit' where id = 1" });
        await started.queryRaw({ sql: 'select 1' });
        await started.createSavepoint('sp');
        // A nested transaction's end is not the transaction's, nor is a COMMIT AND CHAIN (the next transaction
        // starts at once, on the same connection, and Prisma's transaction goes on in it).
        await started.executeRaw({ sql: 'ROLLBACK TO SAVEPOINT sp' });
        await started.executeRaw({ sql: 'COMMIT AND CHAIN' });
        expect(path.executor(tx)).toBeDefined();
        await started.executeRaw({ sql: end });
        expect(path.executor(tx)).toBeUndefined();
      });
    }
    expect(sent).toContain('savepoint sp');
  });

  it("converts as Prisma's raw queries do: argument types from the values, dates and 64-bit integers in results", async () => {
    const queries: unknown[] = [];
    const adapter = {
      provider: 'postgres',
      adapterName: 'recording',
      queryRaw: async (query: unknown) => {
        queries.push(query);
        return {
          columnNames: ['at', 'day', 'big', 'flag', 'text', 'none'],
          columnTypes: [10, 8, 1, 5, 7, 10],
          rows: [['2026-12-01T20:00:00.123456+00:00', '2026-12-01', '9007199254740993', true, 'x', null]],
        };
      },
      executeRaw: async (query: unknown) => {
        queries.push(query);
        return 3;
      },
      startTransaction: async () => {
        throw new Error('not used');
      },
    };
    const fast = withIdempotencyFastPath({
      provider: 'postgres',
      adapterName: 'recording',
      connect: async () => adapter,
    });
    await fast.connect();
    const executor = fastPathOf(fast)?.executor(undefined);
    const at = new Date('2026-01-01T00:00:00Z');
    expect(await executor?.$queryRawUnsafe('select', 's', 2, 2.5, false, 5n, at, null)).toEqual([
      {
        at: new Date('2026-12-01T20:00:00.123Z'),
        day: new Date('2026-12-01'),
        big: 9007199254740993n,
        flag: true,
        text: 'x',
        none: null,
      },
    ]);
    expect(await executor?.$executeRawUnsafe('update', 'k')).toBe(3);
    const scalar = (scalarType: string) => ({ scalarType, arity: 'scalar' });
    expect(queries).toEqual([
      {
        sql: 'select',
        args: ['s', 2, 2.5, false, 5n, at, null],
        argTypes: ['string', 'int', 'float', 'boolean', 'bigint', 'datetime', 'unknown'].map(scalar),
      },
      { sql: 'update', args: ['k'], argTypes: [scalar('string')] },
    ]);
  });

  it('refuses an adapter of another database, and a fastPath that is not one', () => {
    const mysqlLike = { provider: 'mysql', adapterName: 'x', connect: async () => ({}) as never };
    expect(() => withIdempotencyFastPath(mysqlLike)).toThrow(/Postgres SQL; this adapter is for mysql/);
    expect(() =>
      createPrismaIdempotencyStore(db, { fastPath: pgAdapter({ connectionString: url }) }),
    ).toThrow(/withIdempotencyFastPath/);
  });

  it('a duplicate of a fast-path claim is answered by the claim, with no second owner', async () => {
    const request = claimRequest();
    await store.claim(request);
    const duplicate = await store.claim({ ...request, owner: randomUUID() });
    expect(duplicate).toMatchObject({
      claimed: false,
      record: { state: 'processing', leaseOwner: request.owner },
    });
  });
});
