/**
 * The fast path on Prisma's pg adapter folds two round trips of a store transaction away: BEGIN travels with the
 * claim, the completion with the COMMIT (transaction-connection.ts). Counted here as what reaches the pooled
 * node-postgres client (one `query` = one round trip), on a real Postgres; the control is the same fast path on
 * an adapter whose pool it cannot reach (the test hides it), which sends every statement on its own. Then what
 * the folding must not change: the completion is fenced (a completion that matches no row rolls the whole
 * transaction back, the procedure's writes included), the connection goes back to the pool clean, and the
 * procedure's own statements see the deferred completion.
 */
import { type Database, PrismaClient, pgAdapter } from '@idem/db';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RecordKey } from '../src/index.ts';
import {
  createPrismaIdempotencyStore,
  type FastPathOptions,
  type PrismaTransactionLike,
  withIdempotencyFastPath,
} from '../src/prisma/index.ts';
import { ownTableUrl } from './support/db.ts';
import { claimRequest, keyOf, output } from './support/store-fixtures.ts';

type Tx = PrismaTransactionLike<Database>;
type Adapter = Awaited<ReturnType<ReturnType<typeof pgAdapter>['connect']>>;

interface PooledClient {
  query(...args: unknown[]): Promise<unknown>;
}
interface Pool {
  connect(callback?: (error: unknown, client: PooledClient, done: unknown) => void): Promise<PooledClient>;
}

const bounds = { lockTimeoutMs: 1_000, timeoutMs: 5_000 };
let url: string;

beforeAll(async () => {
  url = await ownTableUrl();
  const setup = new PrismaClient({ adapter: pgAdapter({ connectionString: url, max: 1 }) });
  await setup.$executeRawUnsafe('create table effects (scope text not null, who text not null)');
  await setup.$disconnect();
});

/**
 * A store on the fast path over a pool of ONE connection whose `query` calls are counted (every one is a round
 * trip). `reachable: false` hides the pool from the fast path (`underlyingDriver()` answers nothing): the
 * control, where the store's statements go through the adapter transaction one by one.
 */
function countingStore({
  reachable,
  pipeline = false,
  options,
}: {
  reachable: boolean;
  /** Open the pool's connections in node-postgres' pipeline mode (one Sync per query). */
  pipeline?: boolean;
  options?: FastPathOptions;
}) {
  const counter = { roundTrips: 0, statements: [] as string[] };
  const base = pgAdapter({ connectionString: url, max: 1 });
  const factory = new Proxy(base, {
    get(target, property, receiver) {
      if (property !== 'connect') return Reflect.get(target, property, receiver);
      return async () => {
        const adapter = await base.connect();
        const pool = adapter.underlyingDriver() as unknown as Pool & { options: Record<string, unknown> };
        if (pipeline) pool.options.pipeline = true;
        countQueries(pool, counter);
        if (reachable) return adapter;
        return new Proxy(adapter, {
          get: (inner, name, innerReceiver) =>
            name === 'underlyingDriver' ? () => undefined : Reflect.get(inner, name, innerReceiver),
        }) as Adapter;
      };
    },
  });
  const fast = withIdempotencyFastPath(factory, options);
  const db = new PrismaClient({ adapter: fast });
  const store = createPrismaIdempotencyStore(db, { fastPath: fast });
  return { db, store, counter, fast };
}

/** Counts every `query` of every client the pool hands out (the test's own instrument, not the product's). */
function countQueries(pool: Pool, counter: { roundTrips: number; statements: string[] }): void {
  const connect = pool.connect.bind(pool);
  pool.connect = (callback) => {
    const counted = (client: PooledClient) => {
      if (!(client as { counted?: boolean }).counted) {
        const query = client.query.bind(client);
        client.query = (...queryArgs: unknown[]) => {
          counter.roundTrips += 1;
          counter.statements.push(describeQuery(queryArgs[0]));
          return query(...queryArgs);
        };
        Object.assign(client, { counted: true });
      }
      return client;
    };
    // pg-pool's own pool.query() connects with a callback.
    if (callback) return connect((error, client, done) => callback(error, client && counted(client), done));
    return connect().then(counted);
  };
}

function describeQuery(query: unknown): string {
  if (typeof query === 'string') return query;
  const { text, statements } = query as { text?: string; statements?: Array<{ text: string }> };
  if (statements) return statements.map((statement) => label(statement.text)).join(' + ');
  return label(text ?? '');
}
const label = (sql: string) => /^\/\* idem:(\S+) \*\//.exec(sql)?.[1] ?? sql.split(/\s/)[0] ?? sql;

const where = 'scope = $1 and procedure = $2 and key = $3';
const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];

async function firstExecution(store: ReturnType<typeof countingStore>['store'], owner?: string) {
  const request = claimRequest();
  await store.transaction(async (tx: Tx) => {
    await store.claim(request, tx);
    await tx.$executeRawUnsafe('insert into effects (scope, who) values ($1, $2)', request.scope, 'p');
    await store.complete(keyOf(request), owner ?? request.owner, output, tx);
  }, bounds);
  return request;
}

describe('the fast path on node-postgres', () => {
  it('a first execution costs the procedure’s own three: BEGIN + claim, the insert, completion + COMMIT (control: five)', async () => {
    const folded = countingStore({ reachable: true });
    const control = countingStore({ reachable: false });
    try {
      for (const { store } of [folded, control]) await firstExecution(store); // connect, prepare
      folded.counter.roundTrips = control.counter.roundTrips = 0;
      folded.counter.statements = [];
      control.counter.statements = [];
      const request = await firstExecution(folded.store);
      await firstExecution(control.store);
      expect(folded.counter.statements).toEqual(['BEGIN + claim', 'insert', 'complete-at-commit + COMMIT']);
      expect(folded.counter.roundTrips).toBe(3);
      expect(control.counter.roundTrips).toBe(5);
      expect(await folded.store.find(keyOf(request))).toMatchObject({ state: 'completed', response: output });
    } finally {
      await folded.db.$disconnect();
      await control.db.$disconnect();
    }
  });

  it('a completion that matches no row rolls the whole transaction back (control: sent alone, it answers false and the effect commits)', async () => {
    const folded = countingStore({ reachable: true });
    const control = countingStore({ reachable: false });
    try {
      // Another owner than the claim's: the fence matches no row.
      const error = await firstExecution(folded.store, '00000000-0000-4000-8000-00000000dead').catch(
        (caught: unknown) => caught,
      );
      expect(error).toMatchObject({
        message: expect.stringContaining('idempotency completion matched 0 rows'),
      });
      const effects = (scope: string, db: Database) =>
        db.$queryRawUnsafe<unknown[]>('select who from effects where scope = $1', scope);
      // Nothing of that transaction is left, and the pool's one connection works (it was handed back clean).
      const after = await firstExecution(folded.store);
      expect(await folded.store.find(keyOf(after))).toMatchObject({ state: 'completed' });
      expect(await effects(after.scope, folded.db)).toEqual([{ who: 'p' }]);

      // Control: the completion sent on its own answers false, which the transaction ignores: the effect commits
      // without its response.
      const request = claimRequest();
      let completed: boolean | undefined;
      await control.store.transaction(async (tx: Tx) => {
        await control.store.claim(request, tx);
        await tx.$executeRawUnsafe('insert into effects (scope, who) values ($1, $2)', request.scope, 'p');
        completed = await control.store.complete(
          keyOf(request),
          '00000000-0000-4000-8000-00000000dead',
          output,
          tx,
        );
      }, bounds);
      expect(completed).toBe(false);
      expect(await effects(request.scope, control.db)).toEqual([{ who: 'p' }]);
    } finally {
      await folded.db.$disconnect();
      await control.db.$disconnect();
    }
  });

  it('rolls back with the effect: a fenced completion leaves neither the key nor the write', async () => {
    const folded = countingStore({ reachable: true });
    try {
      const request = claimRequest();
      await expect(
        folded.store.transaction(async (tx: Tx) => {
          await folded.store.claim(request, tx);
          await tx.$executeRawUnsafe('insert into effects (scope, who) values ($1, $2)', request.scope, 'p');
          await folded.store.complete(keyOf(request), '00000000-0000-4000-8000-00000000dead', output, tx);
        }, bounds),
      ).rejects.toThrow(/matched 0 rows/);
      const [left] = await folded.db.$queryRawUnsafe<Array<{ keys: number; effects: number }>>(
        `select (select count(*)::int from idempotency_keys where ${where}) as keys,
                (select count(*)::int from effects where scope = $1) as effects`,
        ...keyParams(request),
      );
      expect(left).toEqual({ keys: 0, effects: 0 });
    } finally {
      await folded.db.$disconnect();
    }
  });

  it("sends the owed completion before the procedure's next statement, which sees it", async () => {
    const folded = countingStore({ reachable: true });
    try {
      const request = claimRequest();
      const seen = await folded.store.transaction(async (tx: Tx) => {
        await folded.store.claim(request, tx);
        await folded.store.complete(keyOf(request), request.owner, output, tx);
        return tx.$queryRawUnsafe<Array<{ state: string }>>(
          `select state from idempotency_keys where ${where}`,
          ...keyParams(request),
        );
      }, bounds);
      expect(seen).toEqual([{ state: 'completed' }]);
    } finally {
      await folded.db.$disconnect();
    }
  });

  it('a transaction that sent nothing ends without a round trip, and leaves nothing', async () => {
    const folded = countingStore({ reachable: true });
    try {
      await firstExecution(folded.store); // connect
      folded.counter.roundTrips = 0;
      const failure = new Error('decided before the claim');
      await expect(
        folded.store.transaction(async () => {
          throw failure;
        }, bounds),
      ).rejects.toBe(failure);
      expect(await folded.store.transaction(async () => 'nothing to do', bounds)).toBe('nothing to do');
      expect(folded.counter.roundTrips).toBe(0);
      // The connection is idle, not inside a transaction nobody will end.
      const [status] = await folded.db.$queryRawUnsafe<Array<{ open: boolean }>>(
        "select count(*) > 0 as open from pg_stat_activity where pid = pg_backend_pid() and state like 'idle in transaction%'",
      );
      expect(status).toEqual({ open: false });
    } finally {
      await folded.db.$disconnect();
    }
  });

  it("prepares the store's statements once per connection, in and out of transactions (control: hidden pool, none)", async () => {
    const folded = countingStore({ reachable: true });
    const control = countingStore({ reachable: false });
    const prepared = async (db: Database) =>
      (
        await db.$queryRawUnsafe<Array<{ statement: string }>>(
          'select statement from pg_prepared_statements order by statement',
        )
      ).map((row) => label(row.statement));
    try {
      for (const { store } of [folded, control]) {
        await firstExecution(store);
        const external = claimRequest();
        await store.claim(external);
        await store.complete(keyOf(external), external.owner, output);
      }
      // One connection per pool: Prisma's query runs where the store's statements ran.
      expect(await prepared(folded.db)).toEqual(['claim', 'claim', 'complete', 'complete-at-commit']);
      expect(await prepared(control.db)).toEqual([]);
    } finally {
      await folded.db.$disconnect();
      await control.db.$disconnect();
    }
  });

  it('prepare: false folds the same round trips and prepares nothing', async () => {
    const unnamed = countingStore({ reachable: true, options: { prepare: false } });
    try {
      await firstExecution(unnamed.store);
      unnamed.counter.statements = [];
      const request = await firstExecution(unnamed.store);
      const external = claimRequest();
      await unnamed.store.claim(external);
      await unnamed.store.complete(keyOf(external), external.owner, output);
      expect(unnamed.counter.statements.slice(0, 3)).toEqual([
        'BEGIN + claim',
        'insert',
        'complete-at-commit + COMMIT',
      ]);
      expect(await unnamed.store.find(keyOf(request))).toMatchObject({
        state: 'completed',
        response: output,
      });
      expect(await unnamed.db.$queryRawUnsafe('select statement from pg_prepared_statements')).toEqual([]);
    } finally {
      await unnamed.db.$disconnect();
    }
  });

  it("keeps one statement per round trip on a client in node-postgres' pipeline mode (which refuses a batch)", async () => {
    const pipelined = countingStore({ reachable: true, pipeline: true });
    try {
      await firstExecution(pipelined.store);
      pipelined.counter.roundTrips = 0;
      const request = await firstExecution(pipelined.store);
      expect(pipelined.counter.roundTrips).toBe(5);
      expect(await pipelined.store.find(keyOf(request))).toMatchObject({
        state: 'completed',
        response: output,
      });
    } finally {
      await pipelined.db.$disconnect();
    }
  });

  it('a claim that fails with BEGIN leaves the connection usable (missing table: the error says which)', async () => {
    const folded = countingStore({ reachable: true });
    // The same adapter: a store on another (missing) table.
    const missing = createPrismaIdempotencyStore(folded.db, { table: 'no_such_keys', fastPath: folded.fast });
    try {
      await expect(
        missing.transaction((tx) => missing.claim(claimRequest(), tx), bounds),
      ).rejects.toMatchObject({ name: 'IdempotencyTableMissingError' });
      const after = await firstExecution(folded.store);
      expect(await folded.store.find(keyOf(after))).toMatchObject({ state: 'completed' });
    } finally {
      await folded.db.$disconnect();
    }
  });
});
