/**
 * Issue 29, item 1: a statement of the procedure that Prisma's transaction timeout overtook. Prisma checks that an
 * interactive transaction is open once per operation, then sends the operation's statements on the adapter's
 * transaction object; when its timeout's ROLLBACK comes between two of them, the next one runs on the connection
 * the adapter released — outside any transaction, where the effect commits alone and the key that would answer
 * the retry is rolled back: the retry runs the procedure again. Here the ROLLBACK is sent on that very object
 * (what the timeout does), then the operation's next statement.
 *
 * On every dialect the stores run on: CONTROL without the fence, the late effect commits alone; with
 * `withTransactionFence`, it is refused (`TransactionClosedError`) and nothing of the transaction remains.
 */
import { PrismaClient, pgAdapter } from '@idem/db';
import { createSqlitePrismaClient } from '@idem/db-sqlite';
import { createMariadbPrismaClient, createScratchMariadb, type ScratchMariadb } from '@idem/mariadb-test-db';
import { afterAll, describe, expect, it } from 'vitest';
import type { IdempotencyStore } from '../src/index.ts';
import { createMariadbIdempotencyStore, mariadbIdempotencyKeysSchema } from '../src/mariadb/index.ts';
import {
  createPrismaIdempotencyStore,
  TransactionClosedError,
  withTransactionFence,
} from '../src/prisma/index.ts';
import { createSqliteIdempotencyStore } from '../src/sqlite/index.ts';
import { ownTableUrl, uniqueTableName } from './support/db.ts';
import { keepingTransactions } from './support/keeping-transactions.ts';
import { createSqliteKeyTable, scratchSqliteFile } from './support/sqlite-db.ts';
import { claimRequest, keyOf } from './support/store-fixtures.ts';

interface AdapterTransaction {
  readonly options: { usePhantomQuery: boolean };
  executeRaw(query: { sql: string; args: unknown[]; argTypes: unknown[] }): Promise<number>;
  rollback(): Promise<void>;
}

/** What Prisma's transaction manager does when its timeout fires: ROLLBACK, as the adapter wants it sent. */
async function rollBackAsPrismaDoes(transaction: AdapterTransaction): Promise<void> {
  if (transaction.options.usePhantomQuery) return transaction.rollback();
  try {
    await transaction.executeRaw({ sql: 'ROLLBACK', args: [], argTypes: [] });
  } finally {
    await transaction.rollback();
  }
}

interface RawClient {
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
  $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T>;
  $disconnect(): Promise<void>;
}

interface Dialect {
  name: string;
  /** A client whose adapter is wrapped by `wrap`, its store, and the dialect's placeholder for an argument. */
  open(wrap: <F>(factory: F) => F): Promise<{ client: RawClient; store: IdempotencyStore<unknown> }>;
  placeholder: string;
}

const scratches: ScratchMariadb[] = [];
afterAll(async () => {
  for (const scratch of scratches) await scratch.drop();
});

const effects = uniqueTableName('fence_effects');
const DIALECTS: Dialect[] = [
  {
    name: 'PostgreSQL (Prisma, no fast path)',
    placeholder: '$1',
    async open(wrap) {
      const client = new PrismaClient({
        adapter: wrap(pgAdapter({ connectionString: await ownTableUrl(), max: 2 })),
      });
      await client.$executeRawUnsafe(`create table if not exists ${effects} (scope text not null)`);
      return { client, store: createPrismaIdempotencyStore(client) as IdempotencyStore<unknown> };
    },
  },
  {
    name: 'MariaDB',
    placeholder: '?',
    async open(wrap) {
      const scratch = await createScratchMariadb();
      scratches.push(scratch);
      await scratch.execute([
        ...mariadbIdempotencyKeysSchema().statements,
        `create table ${effects} (scope text)`,
      ]);
      const client = createMariadbPrismaClient(scratch.url, 2, wrap);
      return { client, store: createMariadbIdempotencyStore(client) as IdempotencyStore<unknown> };
    },
  },
  {
    name: 'SQLite',
    placeholder: '?',
    async open(wrap) {
      const file = scratchSqliteFile();
      await createSqliteKeyTable(file);
      const client = createSqlitePrismaClient({ file, wrapAdapter: wrap });
      await client.$executeRawUnsafe(`create table ${effects} (scope text not null)`);
      return { client, store: createSqliteIdempotencyStore(client) as IdempotencyStore<unknown> };
    },
  },
];

/** The claim, Prisma's ROLLBACK, then the operation's next statement on the same adapter transaction. */
async function lateEffect(dialect: Dialect, fence: boolean) {
  const kept: AdapterTransaction[] = [];
  const { client, store } = await dialect.open((factory) =>
    keepingTransactions((fence ? withTransactionFence(factory as never) : factory) as never, kept),
  );
  const request = claimRequest();
  let late: unknown;
  try {
    await store
      .transaction(
        async (tx) => {
          await store.claim(request, tx);
          const transaction = kept.at(-1);
          if (!transaction) throw new Error('Prisma opened no adapter transaction');
          await rollBackAsPrismaDoes(transaction);
          late = await transaction
            .executeRaw({
              sql: `insert into ${effects} (scope) values (${dialect.placeholder})`,
              args: [request.scope],
              argTypes: [{ scalarType: 'string', arity: 'scalar' }],
            })
            .catch((error: unknown) => error);
        },
        { lockTimeoutMs: 1_000, timeoutMs: 5_000 },
      )
      .catch(() => {});
    const rows = await client.$queryRawUnsafe<unknown[]>(
      `select scope from ${effects} where scope = ${dialect.placeholder}`,
      request.scope,
    );
    return { late, effects: rows.length, key: await store.find(keyOf(request)) };
  } finally {
    await client.$disconnect();
  }
}

describe.each(DIALECTS)('$name: a statement after the ROLLBACK', (dialect) => {
  it('CONTROL: without the fence it runs outside the transaction and its effect commits alone, without its key', async () => {
    const control = await lateEffect(dialect, false);
    expect(control.late).toBe(1);
    expect(control.effects).toBe(1);
    expect(control.key).toBeNull();
  });

  it('protected: withTransactionFence refuses it, and nothing of the transaction remains', async () => {
    const fenced = await lateEffect(dialect, true);
    expect(fenced.late).toBeInstanceOf(TransactionClosedError);
    expect(fenced.effects).toBe(0);
    expect(fenced.key).toBeNull();
  });
});
