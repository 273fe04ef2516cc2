/**
 * What the fast path does once a transaction has ended badly, through a real Prisma client on a real Postgres —
 * ways a key or an effect could otherwise commit without the rest of its transaction:
 * - a statement of the procedure that Prisma's transaction timeout overtook (Prisma checks that the transaction
 *   is open once per operation, then sends each of the operation's statements on it): refused, not run on the
 *   connection Prisma already handed back;
 * - a ROLLBACK that node-postgres' `query_timeout` gave up on while an earlier statement still ran, in the
 *   store's transaction or the app's own: the connection is closed, so the pool's next borrower cannot commit
 *   the abandoned transaction with its own;
 * - a COMMIT that Postgres answers with ROLLBACK (a statement failed and the procedure caught its error): an
 *   error, not a success.
 * Each with its control: the same steps without the fast path (plain Prisma), or on a bare connection.
 */
import { createPrismaClient, type Database, pgAdapter } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordKey } from '../src/index.ts';
import {
  CommitRolledBackError,
  createPrismaIdempotencyStore,
  TransactionClosedError,
  withIdempotencyFastPath,
} from '../src/prisma/index.ts';
import { endsTransaction } from '../src/stores/transaction-fence.ts';
import { ownTableUrl, uniqueTableName } from './support/db.ts';
import { keepingTransactions } from './support/keeping-transactions.ts';
import { claimRequest, keyOf, output } from './support/store-fixtures.ts';

/** The slice of Prisma's adapter transaction the tests call, as Prisma's query interpreter does. */
interface AdapterTransaction {
  executeRaw(query: { sql: string; args: unknown[]; argTypes: unknown[] }): Promise<number>;
  queryRaw(query: { sql: string; args: unknown[]; argTypes: unknown[] }): Promise<unknown>;
}
type Factory = ReturnType<typeof pgAdapter>;
/** A node-postgres pooled client, from the adapter's own pool. */
interface BareClient {
  query(text: string): Promise<{ command: string }>;
  release(): void;
}

let url: string;
let db: Database;
const effects = uniqueTableName('late_effects');

beforeAll(async () => {
  url = await ownTableUrl();
  db = createPrismaClient({ connectionString: url, max: 2 });
  await db.$executeRawUnsafe(`create table ${effects} (scope text not null, who text not null)`);
});
afterAll(async () => {
  await db.$disconnect();
});

/** Transaction bounds with room to spare: these tests end their transactions by other means. */
const TIMEOUTS = { lockTimeoutMs: 1_000, timeoutMs: 5_000 };
const where = 'scope = $1 and procedure = $2 and key = $3';
const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];
const keyRows = async (key: RecordKey) =>
  db.$queryRawUnsafe<Array<{ state: string; response: string | null }>>(
    `select state, response from idempotency_keys where ${where}`,
    ...keyParams(key),
  );
const effectsOf = async (scope: string) =>
  (
    await db.$queryRawUnsafe<Array<{ who: string }>>(`select who from ${effects} where scope = $1`, scope)
  ).map((row) => row.who);
const sql = (text: string, ...args: string[]) => ({
  sql: text,
  args,
  argTypes: args.map(() => ({ scalarType: 'string', arity: 'scalar' })),
});

/**
 * A Prisma client and a store on `factory`, with or without the fast path; with `kept`, every adapter
 * transaction Prisma opens is kept there — the object Prisma itself sends statements on (with the fast path,
 * its wrapped transaction).
 */
function storeOn(factory: Factory, fast: boolean, kept?: AdapterTransaction[]) {
  const chosen = fast ? withIdempotencyFastPath(factory) : factory;
  const adapter = kept ? keepingTransactions(chosen, kept) : chosen;
  const client = createPrismaClient({ adapter });
  const store = createPrismaIdempotencyStore(client, fast ? { fastPath: adapter } : {});
  return { client, store };
}

// Each case waits out 5 s statements (twice: control and protected): well past vitest's 30 s on a loaded machine.
describe('the fast path after a store transaction ended badly', { timeout: 90_000 }, () => {
  /**
   * Claims, then holds the transaction past Prisma's timeout on a slow statement sent as Prisma's interpreter
   * sends them (on the adapter transaction it holds); the timeout's ROLLBACK queues behind it. Then the
   * operation's next statement: an effect.
   */
  async function lateEffect(fast: boolean) {
    const kept: AdapterTransaction[] = [];
    const { client, store } = storeOn(pgAdapter({ connectionString: url, max: 1 }), fast, kept);
    const request = claimRequest();
    await client.$queryRawUnsafe('select 1'); // the pool's connection, opened before the clock starts
    let procedureDone: Promise<unknown> = Promise.resolve('not started');
    try {
      await expect(
        store.transaction(
          (tx) => {
            procedureDone = (async () => {
              await store.claim(request, tx);
              const [transaction] = kept;
              if (!transaction) throw new Error('Prisma opened no adapter transaction');
              // Prisma's timeout (timeoutMs + lockTimeoutMs = 3 s) fires while this runs; the transaction's
              // promise may reject before the procedure ends, and the procedure goes on.
              await transaction.executeRaw(sql('select pg_sleep(5)'));
              return transaction
                .executeRaw(sql(`insert into ${effects} (scope, who) values ($1, 'late')`, request.scope))
                .catch((error: unknown) => error);
            })();
            return procedureDone;
          },
          // 3 s: room for the claim before it on a loaded machine, well short of the 5 s statement.
          { lockTimeoutMs: 1_000, timeoutMs: 2_000 },
        ),
      ).rejects.toThrow();
      const late = await procedureDone;
      return { request, late, effects: await effectsOf(request.scope), keys: await keyRows(keyOf(request)) };
    } finally {
      await client.$disconnect();
    }
  }

  it("refuses the procedure's statement that the timeout's ROLLBACK overtook (control: plain Prisma runs it alone)", async () => {
    const control = await lateEffect(false);
    // Without the fast path the statement runs after the ROLLBACK, outside any transaction, and commits.
    expect(control.late).toBe(1);
    expect(control.effects).toEqual(['late']);
    expect(control.keys).toEqual([]);

    const protectedRun = await lateEffect(true);
    expect(protectedRun.late).toBeInstanceOf(TransactionClosedError);
    expect(protectedRun.effects).toEqual([]);
    expect(protectedRun.keys).toEqual([]);
  });

  /**
   * Transaction A, on a pool of one connection whose query_timeout (2 s) gives up on a 5 s statement and then
   * on the ROLLBACK queued behind it: the store's (claims key A) or the app's own (writes an effect). Then a first
   * execution of key B on the same pool. Each transaction reports its connection's server process.
   */
  async function abandonedRollback(fast: boolean, a: 'store' | 'app') {
    const { client, store } = storeOn(
      // 2 s: every other statement on this pool (B's too) answers well within it on a loaded machine.
      pgAdapter({ connectionString: url, max: 1, queryTimeoutMs: 2_000 }),
      fast,
    );
    const requestA = claimRequest();
    const b = claimRequest();
    const backendOf = async (tx: { $queryRawUnsafe: Database['$queryRawUnsafe'] }) =>
      (await tx.$queryRawUnsafe<Array<{ pid: number }>>('select pg_backend_pid() as pid'))[0]?.pid;
    let backendA: number | undefined;
    let backendB: number | undefined;
    try {
      const transactionA =
        a === 'store'
          ? store.transaction(async (tx) => {
              await store.claim(requestA, tx);
              backendA = await backendOf(tx);
              await tx.$executeRawUnsafe('select pg_sleep(5)');
            }, TIMEOUTS)
          : client.$transaction(async (tx) => {
              await tx.$executeRawUnsafe(
                `insert into ${effects} (scope, who) values ($1, 'a')`,
                requestA.scope,
              );
              backendA = await backendOf(tx);
              await tx.$executeRawUnsafe('select pg_sleep(5)');
            });
      await expect(transactionA).rejects.toThrow();
      // Let the slow statement finish on the server: an unclosed connection is then idle in A's transaction.
      await new Promise((resolve) => setTimeout(resolve, 5_300));
      await store.transaction(async (tx) => {
        await store.claim(b, tx);
        backendB = await backendOf(tx);
        await tx.$executeRawUnsafe(`insert into ${effects} (scope, who) values ($1, 'b')`, b.scope);
        await store.complete(keyOf(b), b.owner, output, tx);
      }, TIMEOUTS);
      return {
        sameConnection: backendA !== undefined && backendA === backendB,
        keyA: await keyRows(keyOf(requestA)),
        effectsOfA: await effectsOf(requestA.scope),
        b: await keyRows(keyOf(b)),
        effectsOfB: await effectsOf(b.scope),
      };
    } finally {
      await client.$disconnect();
    }
  }

  it("closes a connection whose ROLLBACK was given up on, in the store's transaction (control: plain Prisma, the next borrower commits it)", async () => {
    const control = await abandonedRollback(false, 'store');
    // A's claim, committed by B's transaction on the same connection: a completed key with no response, which
    // no retry can use.
    expect(control.sameConnection).toBe(true);
    expect(control.keyA).toEqual([{ state: 'completed', response: null }]);
    expect(control.effectsOfB).toEqual(['b']);

    const protectedRun = await abandonedRollback(true, 'store');
    expect(protectedRun.sameConnection).toBe(false);
    expect(protectedRun.keyA).toEqual([]);
    expect(protectedRun.b).toHaveLength(1);
    expect(protectedRun.effectsOfB).toEqual(['b']);
  });

  it("closes it in the app's own transaction too (control: plain Prisma, the next borrower commits its write)", async () => {
    const control = await abandonedRollback(false, 'app');
    expect(control.sameConnection).toBe(true);
    expect(control.effectsOfA).toEqual(['a']);

    const protectedRun = await abandonedRollback(true, 'app');
    expect(protectedRun.sameConnection).toBe(false);
    expect(protectedRun.effectsOfA).toEqual([]);
    expect(protectedRun.b).toHaveLength(1);
    expect(protectedRun.effectsOfB).toEqual(['b']);
  });

  it('tells the statements that end a transaction from those that do not', () => {
    for (const sql of [
      'COMMIT',
      'commit;',
      ' Rollback work ',
      'END TRANSACTION',
      'abort',
      'COMMIT AND NO CHAIN',
    ])
      expect(endsTransaction(sql), sql).toBe(true);
    expect(endsTransaction("/* traceparent='00-1' */ COMMIT -- by Prisma")).toBe(true);
    expect(endsTransaction('-- the end\nROLLBACK')).toBe(true);
    for (const sql of [
      'ROLLBACK TO SAVEPOINT s1',
      'rollback work to savepoint s1',
      'ROLLBACK TRANSACTION TO s1',
      'COMMIT AND CHAIN',
      'ROLLBACK AND CHAIN',
      'RELEASE SAVEPOINT s1',
      "COMMIT PREPARED 'x'",
      'select 1 -- COMMIT',
      'insert into t values (1)',
    ])
      expect(endsTransaction(sql), sql).toBe(false);
  });

  it('fails a COMMIT that Postgres answered with ROLLBACK (control: on a bare connection it resolves)', async () => {
    // Control: Postgres ends a failed transaction's COMMIT with a ROLLBACK, and no error.
    const driver = await pgAdapter({ connectionString: url, max: 1 }).connect();
    const pool = driver.underlyingDriver() as unknown as { connect(): Promise<BareClient> };
    const bare = await pool.connect();
    try {
      await bare.query('BEGIN');
      await bare.query('select 1/0').catch(() => {});
      const commit = await bare.query('COMMIT');
      expect(commit.command).toBe('ROLLBACK');
    } finally {
      bare.release();
      await driver.dispose();
    }

    const { client, store } = storeOn(pgAdapter({ connectionString: url, max: 1 }), true);
    const request = claimRequest();
    try {
      const transaction = store.transaction(async (tx) => {
        await store.claim(request, tx);
        await tx.$executeRawUnsafe(
          `insert into ${effects} (scope, who) values ($1, 'effect')`,
          request.scope,
        );
        await store.complete(keyOf(request), request.owner, output, tx);
        // A statement after the completion (which it sends along) fails; the procedure swallows the error.
        await tx.$executeRawUnsafe('select 1/0').catch(() => {});
      }, TIMEOUTS);
      await expect(transaction).rejects.toThrow(CommitRolledBackError);
      expect(await keyRows(keyOf(request))).toEqual([]);
      expect(await effectsOf(request.scope)).toEqual([]);
    } finally {
      await client.$disconnect();
    }
  });
});
