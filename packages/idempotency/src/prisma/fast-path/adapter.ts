/**
 * The store's own statements without the ORM's per-query path. Through Prisma, every raw statement goes through
 * the client (request, query interpreter, result conversion) before it reaches the driver adapter: `pnpm
 * bench:profile` measured ≈ 0.17 ms per statement on top of its SQL, and a protected request sends two or three
 * of them. The fast path sends the store's statements straight to the driver adapter Prisma uses — on the very
 * transaction Prisma opened for the request, so the key and the effect still commit or roll back together.
 *
 *   const adapter = withIdempotencyFastPath(new PrismaPg(pool));
 *   const db = new PrismaClient({ adapter });
 *   const store = createPrismaIdempotencyStore(db, { fastPath: adapter });
 *
 * How a statement finds its transaction: the store opens every transaction inside `fastPath.run()` (an
 * AsyncLocalStorage slot); the wrapped adapter's `startTransaction`, which Prisma calls for that
 * `$transaction`, records the adapter transaction in the slot; the store's callback binds it to Prisma's `tx`
 * first thing, so a transaction the procedure opens itself later is never taken for the store's.
 *
 * Safety: a statement is sent on the adapter transaction only while that transaction is open. Once Prisma ends
 * it (COMMIT or ROLLBACK sent — on a timeout too — or the connection handed back), the statement goes through
 * Prisma's `tx` as without the fast path, where Prisma refuses it as it always did ("Transaction already
 * closed"): a late statement can never run outside its transaction, on a connection another request now holds.
 * The same holds for the procedure's own statements: Prisma checks that its transaction is open once per
 * operation, so the later statements of one operation (a nested write) could follow a timeout's ROLLBACK; the
 * wrapped transaction refuses them (`TransactionClosedError`).
 * Before the adapter is connected (Prisma connects on its first query), statements go through Prisma too.
 *
 * On Prisma's pg adapter over a node-postgres pool (node-postgres.ts), the store goes one level further down:
 * its statements run on the pool's connections, prepared once per connection, and the store's transaction runs
 * on a connection that sends BEGIN with the claim and the completion with the COMMIT, one round trip each
 * (transaction-connection.ts). Other adapters get the statements on the adapter transaction, one by one.
 *
 * Errors from the fast path are the driver's own (node-postgres' `DatabaseError`, or the adapter's
 * `DriverAdapterError` with the SQLSTATE in `cause.originalCode`) rather than Prisma's P2010 wrapping of the same
 * error; the store recognises all of them (lock timeout, missing table).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type {
  DriverAdapterFactoryLike,
  DriverAdapterLike,
  SqlQueryableLike,
  SqlQueryLike,
  TransactionLike,
} from '../../stores/driver-adapter.ts';
import type { SqlExecutor } from '../../stores/prisma-client.ts';
import { endsTransaction, FENCED, TransactionClosedError } from '../../stores/transaction-fence.ts';
import {
  executorOnConnection,
  executorOnPool,
  poolOf,
  startCapturing,
  statementOf,
} from './node-postgres.ts';
import type { TransactionConnection } from './transaction-connection.ts';

/** What the store asks of the fast path (the value `withIdempotencyFastPath` returns carries it). */
export interface IdempotencyFastPath {
  /** Runs `open` (which opens ONE Prisma interactive transaction) with a slot its adapter transaction fills. */
  run<T>(open: () => Promise<T>): Promise<T>;
  /** Inside the `$transaction` callback that `run` opened: ties Prisma's `tx` to the adapter transaction. */
  bind(tx: object): void;
  /** Where a statement for `tx` (undefined: outside any transaction) goes fast, or undefined: through Prisma. */
  executor(tx: object | undefined): SqlExecutor | undefined;
  /**
   * Queues a statement of `tx` to be sent with its COMMIT (in one round trip, under one Sync); false when this
   * transaction cannot (then send it now). A failure of the statement rolls the whole transaction back.
   */
  deferUntilCommit(tx: object, sql: string, values: unknown[]): boolean;
}

const FAST_PATH = Symbol.for('@idem/idempotency/prisma fast path');

/** A driver adapter factory that also carries the fast path (pass it to Prisma AND to the store). */
export type WithFastPath<TFactory> = TFactory & { readonly [FAST_PATH]: IdempotencyFastPath };

interface Slot {
  transaction?: OpenTransaction;
}
interface OpenTransaction {
  executor: SqlExecutor;
  open: boolean;
  /** The transaction's own pooled connection, when the adapter's was captured (node-postgres' pool). */
  connection?: TransactionConnection;
}

export interface FastPathOptions {
  /**
   * On a node-postgres pool, prepare the store's statements once per connection (named statements). Default
   * true: planning the claim costs more than running it. `false` behind a pooler in transaction mode that cannot
   * track prepared statements (PgBouncer before 1.21, or without `max_prepared_statements`).
   */
  prepare?: boolean;
}

/** Marks `factory`'s transactions so the idempotency store can send its statements on them directly. */
export function withIdempotencyFastPath<TFactory extends DriverAdapterFactoryLike>(
  factory: TFactory,
  { prepare = true }: FastPathOptions = {},
): WithFastPath<TFactory> {
  if (factory.provider !== 'postgres')
    throw new TypeError(
      `withIdempotencyFastPath: the Prisma store's statements are Postgres SQL; this adapter is for ${factory.provider}`,
    );
  const slots = new AsyncLocalStorage<Slot>();
  const bound = new WeakMap<object, OpenTransaction>();
  let connected: SqlExecutor | undefined;

  const fastPath: IdempotencyFastPath = {
    run: (open) => slots.run({}, open),
    bind(tx) {
      const transaction = slots.getStore()?.transaction;
      if (transaction) bound.set(tx, transaction);
    },
    executor(tx) {
      if (tx === undefined) return connected;
      const transaction = bound.get(tx);
      return transaction?.open ? transaction.executor : undefined;
    },
    deferUntilCommit(tx, sql, values) {
      const transaction = bound.get(tx);
      if (!transaction?.open || !transaction.connection) return false;
      transaction.connection.deferUntilCommit(statementOf(sql, values, prepare));
      return true;
    },
  };

  function tracked(transaction: TransactionLike, connection?: TransactionConnection): TransactionLike {
    const state: OpenTransaction = connection
      ? { executor: executorOnConnection(connection, prepare), open: true, connection }
      : { executor: executorOn(transaction), open: true };
    // The store binds it at the start of its callback, before the procedure can open a transaction of its own.
    const slot = slots.getStore();
    if (slot) slot.transaction = state;
    return new Proxy(transaction, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== 'function') return value;
        // Closed before the COMMIT or ROLLBACK is queued: nothing of ours can be sent after it.
        if (property === 'commit' || property === 'rollback')
          return (...args: unknown[]) => {
            state.open = false;
            return Reflect.apply(value, target, args);
          };
        if (property === 'executeRaw' || property === 'queryRaw')
          return (query: SqlQueryLike) => {
            if (endsTransaction(query.sql)) {
              state.open = false;
              // A COMMIT or ROLLBACK that fails (node-postgres' query_timeout gave up on it while an earlier
              // statement still ran) leaves the transaction open on a connection Prisma then hands back to the
              // pool, where the next borrower's statements would run in it, and its COMMIT commit it. Closed
              // instead: the pool drops it, and Postgres rolls the session back.
              return (Reflect.apply(value, target, [query]) as Promise<unknown>).catch(
                async (error: unknown) => {
                  await clientOf(target)
                    ?.end()
                    .catch(() => {});
                  throw error;
                },
              );
            }
            // Prisma checks that a transaction is open once per operation, then sends all of the operation's
            // statements on it: one that a timeout's ROLLBACK overtook would run after it, outside the
            // transaction, on a connection back in the pool — an effect committed without its key.
            if (!state.open) return Promise.reject(new TransactionClosedError());
            return Reflect.apply(value, target, [query]);
          };
        return (...args: unknown[]) => Reflect.apply(value, target, args);
      },
    });
  }

  const wrapped = new Proxy(factory, {
    get(target, property, receiver) {
      if (property === FAST_PATH) return fastPath;
      if (property === FENCED) return true;
      const value: unknown = Reflect.get(target, property, receiver);
      if (property !== 'connect' || typeof value !== 'function') return value;
      return async () => {
        const adapter = (await Reflect.apply(value, target, [])) as DriverAdapterLike;
        const pool = poolOf(adapter);
        connected = pool ? executorOnPool(pool, prepare) : executorOn(adapter);
        return new Proxy(adapter, {
          get(inner, name, innerReceiver) {
            const member: unknown = Reflect.get(inner, name, innerReceiver);
            if (typeof member !== 'function') return member;
            if (name === 'startTransaction')
              return async (...args: unknown[]) => {
                const pool = slots.getStore() ? poolOf(inner) : undefined;
                if (!pool) return tracked((await Reflect.apply(member, inner, args)) as TransactionLike);
                // The store's own transaction, on node-postgres: its connection folds round trips away.
                const started = await startCapturing(
                  member as (...startArgs: unknown[]) => Promise<TransactionLike>,
                  inner,
                  pool,
                  args,
                );
                return tracked(started.transaction, started.connection);
              };
            // `$disconnect` ends this adapter's pool: until Prisma connects again, statements go through Prisma.
            if (name === 'dispose')
              return (...args: unknown[]) => {
                connected = undefined;
                return Reflect.apply(member, inner, args);
              };
            return (...args: unknown[]) => Reflect.apply(member, inner, args);
          },
        });
      };
    },
  });
  return wrapped as WithFastPath<TFactory>;
}

/** The node-postgres client under Prisma's pg adapter transaction (`PgTransaction.client`), if it has one. */
function clientOf(transaction: object): { end(): Promise<void> } | undefined {
  const client = (transaction as { client?: { end?: unknown } }).client;
  return typeof client?.end === 'function' ? (client as { end(): Promise<void> }) : undefined;
}

/** A statement sent on a transaction after its COMMIT or ROLLBACK: refused, never sent. */
/** The fast path `withIdempotencyFastPath` put on `factory`, if any. */
export function fastPathOf(factory: object): IdempotencyFastPath | undefined {
  return (factory as { [FAST_PATH]?: IdempotencyFastPath })[FAST_PATH];
}

// Column types of Prisma's driver adapters (`ColumnTypeEnum`) whose values Prisma turns into other JS types.
const INT64 = 1;
const DATE = 8;
const DATE_TIME = 10;

/** `$queryRawUnsafe` / `$executeRawUnsafe` on an adapter queryable, with Prisma's result types for our columns. */
function executorOn(queryable: SqlQueryableLike): SqlExecutor {
  const query = (sql: string, values: unknown[]): SqlQueryLike => ({
    sql,
    args: values,
    argTypes: values.map((value) => ({ scalarType: argType(value), arity: 'scalar' })),
  });
  return {
    async $queryRawUnsafe<T>(sql: string, ...values: unknown[]) {
      const { columnNames, columnTypes, rows } = await queryable.queryRaw(query(sql, values));
      return rows.map((row) =>
        Object.fromEntries(columnNames.map((name, i) => [name, fromColumn(row[i], columnTypes[i])])),
      ) as T;
    },
    $executeRawUnsafe: (sql: string, ...values: unknown[]) => queryable.executeRaw(query(sql, values)),
  };
}

function argType(value: unknown): string {
  if (typeof value === 'string') return 'string';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'bigint') return 'bigint';
  if (value instanceof Date) return 'datetime';
  return 'unknown';
}

/** A column's value as Prisma returns it: the adapter gives dates and 64-bit integers as text. */
function fromColumn(value: unknown, type: number | undefined): unknown {
  if (value === null) return null;
  if (type === DATE_TIME || type === DATE) return new Date(value as string);
  if (type === INT64) return BigInt(value as string);
  return value;
}
