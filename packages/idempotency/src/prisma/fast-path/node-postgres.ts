/**
 * The fast path's node-postgres level, used when Prisma's pg adapter runs on a node-postgres `Pool` (what
 * `@prisma/adapter-pg` creates or is given): the store's statements go to the pool's connections themselves,
 * prepared once per connection, and a store transaction runs on a `transactionConnection` that folds BEGIN into
 * the claim's round trip and the completion into the COMMIT's. Anything else keeps the adapter-level fast path.
 */
import type { SqlExecutor } from '../../stores/prisma-client.ts';
import { idempotencyStatementName } from '../statement-names.ts';
import type { BatchStatement } from './pg-batch.ts';
import {
  type PoolClientLike,
  type TransactionConnection,
  transactionConnection,
} from './transaction-connection.ts';

/** The slice of node-postgres' `Pool` the fast path uses. */
export interface PoolLike {
  connect(): Promise<PoolClientLike>;
  query(statement: BatchStatement): Promise<{ rows: unknown[]; rowCount: number | null }>;
}

/** The node-postgres pool under a driver adapter (Prisma's pg adapter: `underlyingDriver()`), if it is one. */
export function poolOf(adapter: object): PoolLike | undefined {
  const driver = (adapter as { underlyingDriver?: () => unknown }).underlyingDriver?.();
  const pool = driver as { connect?: unknown; query?: unknown; totalCount?: unknown } | undefined;
  if (
    typeof pool?.connect !== 'function' ||
    typeof pool.query !== 'function' ||
    pool.totalCount === undefined
  )
    return undefined;
  return pool as PoolLike;
}

/**
 * Runs the adapter's own `startTransaction` with its pool's `connect` answered by a `transactionConnection`:
 * the adapter (its BEGIN, the procedure's statements, COMMIT or ROLLBACK) and the store then share that one
 * connection. `connection` is undefined when the adapter did not connect through `this.client` as Prisma's pg
 * adapter does, or the client is in node-postgres' pipeline mode (which refuses a batch): the caller then keeps
 * the adapter-level fast path.
 */
export async function startCapturing<T>(
  startTransaction: (...args: unknown[]) => Promise<T>,
  adapter: object,
  pool: PoolLike,
  args: unknown[],
): Promise<{ transaction: T; connection: TransactionConnection | undefined }> {
  let connection: TransactionConnection | undefined;
  const connectingThroughUs = new Proxy(adapter, {
    get(target, key) {
      if (key !== 'client') return Reflect.get(target, key, target);
      return {
        connect: async () => {
          const client = await pool.connect();
          if ((client as { pipeline?: unknown }).pipeline === true) return client;
          connection = transactionConnection(client);
          return connection.client;
        },
      };
    },
  });
  const transaction = await Reflect.apply(startTransaction, connectingThroughUs, args);
  return { transaction, connection };
}

/**
 * One of the store's statements for node-postgres: named (prepared once per connection, then only bound and
 * executed: planning the claim costs more than running it) unless `prepare` is false.
 */
export function statementOf(sql: string, values: unknown[], prepare: boolean): BatchStatement {
  const name = prepare ? idempotencyStatementName(sql) : '';
  return name ? { text: sql, values, name } : { text: sql, values };
}

/** Statements outside a transaction (external mode's claim, completion, lease; the replay count): pooled. */
export function executorOnPool(pool: PoolLike, prepare: boolean): SqlExecutor {
  return executorOver((statement) => pool.query(statement), prepare);
}

/** Statements of a store transaction, on its own connection (after whatever it owes, BEGIN first). */
export function executorOnConnection(connection: TransactionConnection, prepare: boolean): SqlExecutor {
  return executorOver((statement) => connection.send(statement), prepare);
}

/** `$queryRawUnsafe` / `$executeRawUnsafe` over node-postgres results (row objects, its own type parsers). */
function executorOver(
  run: (statement: BatchStatement) => Promise<{ rows: unknown[]; rowCount: number | null }>,
  prepare: boolean,
): SqlExecutor {
  return {
    async $queryRawUnsafe<T>(sql: string, ...values: unknown[]) {
      return (await run(statementOf(sql, values, prepare))).rows as T;
    },
    async $executeRawUnsafe(sql: string, ...values: unknown[]) {
      return (await run(statementOf(sql, values, prepare))).rowCount ?? 0;
    },
  };
}
