/**
 * The fence every store's transactions need, whatever the database: once a transaction's COMMIT or ROLLBACK has
 * been sent, no statement is sent on it any more. Prisma checks that an interactive transaction is open once per
 * operation, then sends all of the operation's statements on the adapter's transaction object; when its timeout
 * rolls the transaction back in the middle of an operation, the operation's later statements would run on the
 * connection the adapter has released — outside any transaction (MariaDB's pool, SQLite's one connection after
 * its ROLLBACK, node-postgres' pool), where an effect commits alone, without the key that would have answered a
 * retry. Wrapped with `withTransactionFence`, the adapter refuses them instead (`TransactionClosedError`).
 * `withIdempotencyFastPath` has the same fence built in.
 */
import type { DriverAdapterFactoryLike, SqlQueryLike, TransactionLike } from './driver-adapter.ts';
import { wrapTransactions } from './wrap-transactions.ts';

export class TransactionClosedError extends Error {
  override readonly name = 'TransactionClosedError';

  constructor() {
    super('Transaction already closed: a statement sent after its COMMIT or ROLLBACK was refused, not sent');
  }
}

/** A COMMIT that Postgres answered with ROLLBACK: the transaction had failed, nothing was committed. */
export class CommitRolledBackError extends Error {
  override readonly name = 'CommitRolledBackError';

  constructor() {
    super('COMMIT rolled back: a statement of the transaction had failed, so nothing was committed');
  }
}

const MAY_END_TRANSACTION = /^\s*(?:\/\*|--|commit|end|rollback|abort)/i;

/**
 * True for a statement that ends the transaction: COMMIT, END, ROLLBACK or ABORT (WORK or TRANSACTION, AND NO
 * CHAIN), comments aside. Not ROLLBACK TO SAVEPOINT (the end of a nested transaction), nor … AND CHAIN (a new
 * transaction starts at once on the same connection, and the procedure's statements go on in it).
 */
export function endsTransaction(sql: string): boolean {
  // Every statement of every transaction on the adapter passes here: most are told apart by their first word,
  // without copying the text.
  if (!MAY_END_TRANSACTION.test(sql)) return false;
  const bare = sql.replace(/\/\*[\s\S]*?\*\/|--[^\n]*/g, ' ');
  return /^\s*(?:commit|end|rollback|abort)(?:\s+(?:work|transaction))?(?:\s+and\s+no\s+chain)?\s*;?\s*$/i.test(
    bare,
  );
}

const SAVEPOINT_METHODS = new Set<PropertyKey>([
  'createSavepoint',
  'rollbackToSavepoint',
  'releaseSavepoint',
]);

/** Marks a factory whose transactions are fenced (this wrapper's, or the fast path's): it is not wrapped again. */
export const FENCED: unique symbol = Symbol.for('@idem/idempotency transaction fence');

/** `transaction`, refusing every statement once its COMMIT or ROLLBACK has been sent. */
export function fencedTransaction(transaction: TransactionLike): TransactionLike {
  let open = true;
  return new Proxy(transaction, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      if (property === 'commit' || property === 'rollback')
        return (...args: unknown[]) => {
          open = false;
          return Reflect.apply(value, target, args);
        };
      if (property === 'executeRaw' || property === 'queryRaw')
        return (query: SqlQueryLike) => {
          if (!open) return Promise.reject(new TransactionClosedError());
          if (endsTransaction(query.sql)) open = false;
          return Reflect.apply(value, target, [query]);
        };
      // A savepoint's statements are statements of the transaction too.
      if (SAVEPOINT_METHODS.has(property))
        return (...args: unknown[]) =>
          open ? Reflect.apply(value, target, args) : Promise.reject(new TransactionClosedError());
      return (...args: unknown[]) => Reflect.apply(value, target, args);
    },
  });
}

/**
 * `factory` (any Prisma 7 driver adapter factory: `PrismaMariaDb`, `PrismaBetterSqlite3`, `PrismaPg`, …) whose
 * interactive transactions send nothing after their COMMIT or ROLLBACK. Give the result to `new PrismaClient`.
 */
export function withTransactionFence<TFactory extends DriverAdapterFactoryLike>(factory: TFactory): TFactory {
  if ((factory as { [FENCED]?: boolean })[FENCED]) return factory;
  return wrapTransactions(factory, fencedTransaction, { [FENCED]: true });
}
