/**
 * The pooled node-postgres connection of ONE store transaction, with two round trips folded away:
 *
 * - Prisma's pg adapter opens the transaction with `BEGIN` and waits for the answer. Here `BEGIN` is answered at
 *   once and sent with the transaction's first real statement (the claim), in one round trip under one Sync
 *   (`sendBatch`): if `BEGIN` failed, the claim would not run at all — never outside the transaction.
 * - The store's completion is deferred (`deferUntilCommit`) and sent with Prisma's `COMMIT`, again under one
 *   Sync: if the completion fails, the `COMMIT` is skipped and the transaction rolled back; the effect never
 *   commits without its stored response.
 *
 * Whatever is owed goes out before any other statement on the connection, in order, so the procedure's own
 * queries (through Prisma) see exactly what they would have seen without the folding. Every statement through
 * this wrapper waits for the previous one to be answered (Prisma waits for each of its own anyway): a statement
 * issued while `BEGIN` is being sent can never overtake it, nor can a later ROLLBACK (Prisma's transaction
 * timeout) overtake an earlier statement. A transaction that sent nothing (its `BEGIN` still owed) ends without
 * a round trip.
 */
import { CommitRolledBackError } from '../../stores/transaction-fence.ts';
import { type BatchResult, type BatchStatement, type PgClientLike, sendBatch } from './pg-batch.ts';

/** A pooled node-postgres client as Prisma's pg adapter uses it. */
export interface PoolClientLike extends PgClientLike {
  query(config: unknown, values?: unknown): Promise<unknown>;
  release(error?: unknown): void;
  end(): Promise<void>;
}

export interface TransactionConnection {
  /** What Prisma's adapter is given in place of the pooled client. */
  readonly client: PoolClientLike;
  /** Sends `statement` (after whatever is owed) and resolves to its result. */
  send(statement: BatchStatement): Promise<BatchResult>;
  /** Sends `statement` with the transaction's next round trip at the latest: its COMMIT. */
  deferUntilCommit(statement: BatchStatement): void;
}

const BEGIN: BatchStatement = { text: 'BEGIN', values: [] };

/** `client`, whose first `BEGIN` is owed until the transaction's first statement. */
export function transactionConnection(client: PoolClientLike): TransactionConnection {
  let owed: BatchStatement[] = [];
  let begun = false;
  /** The last statement sent through this wrapper, answered or not: the next one starts after it. */
  let tail: Promise<unknown> = Promise.resolve();
  function inOrder<T>(statement: () => Promise<T>): Promise<T> {
    const answered = tail.then(statement, statement);
    tail = answered.catch(() => {});
    return answered;
  }

  /** Sends what is owed plus `statements` in one round trip; the results of `statements`. */
  async function flushWith(statements: BatchStatement[]): Promise<BatchResult[]> {
    const batch = [...owed, ...statements];
    const skip = owed.length;
    owed = [];
    if (batch.length === 0) return [];
    return (await sendBatch(client, batch)).slice(skip);
  }

  async function answer(config: unknown, values?: unknown): Promise<unknown> {
    const text = statementText(config);
    if (!begun && text === 'BEGIN' && !hasValues(config, values)) {
      begun = true;
      owed = [BEGIN];
      return emptyResult('BEGIN');
    }
    if (text === 'ROLLBACK' && owed[0] === BEGIN) {
      // Nothing was sent: there is no transaction on the server to roll back.
      owed = [];
      return emptyResult('ROLLBACK');
    }
    if (text === 'ROLLBACK') {
      owed = [];
      // A ROLLBACK that fails closes the connection: the fast path's wrapped transaction does it, for every
      // transaction on the adapter (fast-path.ts).
      return client.query(config, values);
    }
    if (text === 'COMMIT') {
      if (owed.length === 1 && owed[0] === BEGIN) {
        owed = [];
        return emptyResult('COMMIT');
      }
      try {
        const [commit] = await flushWith([{ text: 'COMMIT', values: [] }]);
        // Postgres answers the COMMIT of a failed transaction with a ROLLBACK, and no error (a statement that
        // failed after the completion went out, its error caught by the procedure): nothing was committed.
        if (commit?.command === 'ROLLBACK') throw new CommitRolledBackError();
        return commit;
      } catch (error) {
        // A failed statement before the COMMIT left the transaction aborted (the COMMIT was skipped): end it
        // here, because Prisma hands the connection back to the pool after a failed COMMIT without a ROLLBACK.
        // After a failed COMMIT itself, this ROLLBACK only draws a warning. A connection that cannot even roll
        // back (lost, or its query_timeout gave up on it) is closed: the pool then drops it, and Postgres ends
        // the transaction with the session.
        await client.query('ROLLBACK').catch(() => client.end().catch(() => {}));
        throw error;
      }
    }
    if (owed.length > 0) await flushWith([]);
    return client.query(config, values);
  }

  const query = (config: unknown, values?: unknown) => inOrder(() => answer(config, values));
  const proxied = new Proxy(client, {
    get(target, property) {
      if (property === 'query') return query;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });

  return {
    client: proxied,
    send(statement) {
      return inOrder(async () => {
        const [result] = await flushWith([statement]);
        if (!result) throw new Error('the batch returned no result for its statement');
        return result;
      });
    },
    deferUntilCommit(statement) {
      owed.push(statement);
    },
  };
}

/** The statement's text when it may be BEGIN, COMMIT or ROLLBACK (upper case), else undefined. */
function statementText(config: unknown): string | undefined {
  const text = typeof config === 'string' ? config : (config as { text?: unknown } | null)?.text;
  return typeof text === 'string' && text.length <= 16 ? text.trim().toUpperCase() : undefined;
}

function hasValues(config: unknown, values: unknown): boolean {
  const fromConfig = (config as { values?: unknown } | null)?.values;
  return [fromConfig, values].some((list) => Array.isArray(list) && list.length > 0);
}

function emptyResult(command: string): BatchResult {
  return { command, rowCount: null, fields: [], rows: [] };
}
