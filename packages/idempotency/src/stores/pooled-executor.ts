/**
 * A driver's connection pool as the client the SQL stores take (`PrismaClientLike`), for an app without Prisma:
 * the store's SQL is the same, only the way it is sent changes. A statement alone goes to the pool; a
 * transaction is one pooled connection with BEGIN, the callback's statements, then COMMIT (ROLLBACK on an
 * error). Like Prisma's interactive transactions: a bounded wait for a connection (`maxWait`), a bounded
 * transaction (`timeout`: past it, ROLLBACK and the callback's later statements are refused), and nothing sent
 * after the end (the fence).
 *
 * The rules live here; each driver (`PooledDriver`: node-postgres in pg/, mariadb in mariadb/) only says how
 * to send a statement, take a connection and give it back.
 */
import type { PrismaClientLike, SqlExecutor } from './prisma-client.ts';
import { timerDelay } from './timer-delay.ts';
import { CommitRolledBackError, TransactionClosedError } from './transaction-fence.ts';

/** What the executor needs of a driver; `on` is a pooled connection, or undefined for the pool itself. */
export interface PooledDriver<TConnection> {
  /** The statement's rows. */
  query(on: TConnection | undefined, sql: string, values: unknown[]): Promise<unknown[]>;
  /** The rows the statement changed (or matched, as the driver counts). */
  execute(on: TConnection | undefined, sql: string, values: unknown[]): Promise<number>;
  connect(): Promise<TConnection>;
  /** Back to the pool; `destroy`: closed instead, its state unknown (a ROLLBACK that failed). */
  release(connection: TConnection, destroy: boolean): void;
  /**
   * Optional: COMMIT on `connection`, rejecting (CommitRolledBackError) when the database ended the transaction
   * without committing it — Postgres answers the COMMIT of a transaction a failed statement aborted with ROLLBACK
   * and no error. Without it, COMMIT is sent through `execute` and such an answer goes unseen.
   */
  commit?(connection: TConnection): Promise<void>;
  /**
   * Optional: whether `connection` is still in the transaction, asked after one of its statements failed. Some
   * errors end the whole transaction on the server (InnoDB's deadlock victim), and a statement sent after that
   * runs alone in autocommit and stays. False: the transaction's later statements are refused and its COMMIT
   * fails (CommitRolledBackError) — nothing of it committed.
   */
  inTransaction?(connection: TConnection): Promise<boolean>;
  /** The error of a wait or a transaction past its bound (each driver's own class, exported with it). */
  timeoutError(message: string): Error;
}

/**
 * Marks an executor whose `$transaction` rejects when its COMMIT did not commit (see `PooledDriver.commit`) or
 * the server ended the transaction under it (`PooledDriver.inTransaction`): a store on it need not check the
 * transaction before the COMMIT (`IdempotencyStore.checkTransaction`).
 */
export const COMMIT_CHECKED: unique symbol = Symbol.for('@idem/idempotency commit checked');

/** Prisma's defaults for an interactive transaction: 2 s to get a connection, 5 s to run. */
const DEFAULT_MAX_WAIT_MS = 2_000;
const DEFAULT_TIMEOUT_MS = 5_000;

function executorOn<TConnection>(
  driver: PooledDriver<TConnection>,
  on: TConnection | undefined,
  isOpen: () => boolean = () => true,
  failed: () => Promise<void> = async () => {},
): SqlExecutor {
  const refused = () => Promise.reject(new TransactionClosedError());
  const afterFailure = async (error: unknown): Promise<never> => {
    await failed();
    throw error;
  };
  return {
    $queryRawUnsafe: <T>(sql: string, ...values: unknown[]) =>
      isOpen() ? (driver.query(on, sql, values).catch(afterFailure) as Promise<T>) : refused(),
    $executeRawUnsafe: (sql: string, ...values: unknown[]) =>
      isOpen() ? driver.execute(on, sql, values).catch(afterFailure) : refused(),
  };
}

/** `promise`, or `error()` once `ms` have passed first. */
function boundedBy<T>(promise: Promise<T>, ms: number, error: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(error()), timerDelay(ms));
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** `driver`'s pool as a SQL store's client. */
export function pooledExecutor<TConnection>(driver: PooledDriver<TConnection>): PrismaClientLike {
  return {
    ...executorOn(driver, undefined),
    ...(driver.commit || driver.inTransaction ? { [COMMIT_CHECKED]: true } : {}),
    async $transaction<R>(
      fn: (tx: never) => Promise<R>,
      options: { maxWait?: number; timeout?: number } = {},
    ): Promise<R> {
      const connecting = driver.connect();
      const connection = await boundedBy(connecting, options.maxWait ?? DEFAULT_MAX_WAIT_MS, () =>
        driver.timeoutError('No pooled connection within maxWait.'),
      ).catch((error: unknown) => {
        // A connection that arrives after the wait goes straight back.
        void connecting.then(
          (late) => driver.release(late, false),
          () => {},
        );
        throw error;
      });
      let open = true;
      let ended = false;
      /** The server ended the transaction itself (see `PooledDriver.inTransaction`). */
      let lost = false;
      const failed = async () => {
        if (open && driver.inTransaction && !(await driver.inTransaction(connection).catch(() => true)))
          lost = true;
      };
      try {
        await driver.execute(connection, 'BEGIN', []);
        const result = await boundedBy(
          fn(executorOn(driver, connection, () => open && !lost, failed) as never),
          options.timeout ?? DEFAULT_TIMEOUT_MS,
          () => driver.timeoutError('The transaction ran past its timeout and was rolled back.'),
        );
        open = false;
        if (lost) throw new CommitRolledBackError();
        if (driver.commit) await driver.commit(connection);
        else await driver.execute(connection, 'COMMIT', []);
        ended = true;
        driver.release(connection, false);
        return result;
      } catch (error) {
        open = false;
        // A connection whose ROLLBACK failed is closed rather than handed back mid-transaction.
        const rolledBack =
          ended ||
          (await driver.execute(connection, 'ROLLBACK', []).then(
            () => true,
            () => false,
          ));
        driver.release(connection, !rolledBack);
        throw error;
      }
    },
  };
}
