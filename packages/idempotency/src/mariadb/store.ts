/**
 * The key table on MariaDB (InnoDB) through any Prisma 7 client on `@prisma/adapter-mariadb`: the same contract
 * as the Postgres store (core/store.ts), kept with InnoDB's own primitives. Every time is the database's
 * UTC_TIMESTAMP(6), never the app's clock.
 */
import { TransactionLostError } from '../core/errors.ts';
import type { RecordKey, StoredResponse } from '../core/record.ts';
import type { ClaimRequest, ClaimResult } from '../core/store.ts';
import { type ClaimedRow, claimThrough } from '../stores/claim-flow.ts';
import { isTrue, type KeyRow, recordOfRow, type SqlBoolean } from '../stores/key-row.ts';
import { COMMIT_CHECKED } from '../stores/pooled-executor.ts';
import type { SqlExecutor, StoreOnPrismaClient } from '../stores/prisma-client.ts';
import { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
import {
  explainingMissingMariadbTable,
  MariadbKeyColumnTooLongError,
  MariadbResponseTooLargeError,
} from './errors.ts';
import {
  hasMariadbErrno,
  MARIADB_KEY_COLUMN_BYTES,
  MARIADB_RESPONSE_BYTES,
  quoteMariadbTable,
} from './sql.ts';

export interface MariadbStoreOptions {
  /** The table (see `mariadbIdempotencyKeysSchema()`). Default `idempotency_keys`. */
  table?: string;
  /**
   * External mode renews the owner's lease while its procedure runs (`renewLease`). Default true. `false` leaves
   * `renewLease` out: only for tests that need a lease to end under a running request.
   */
  leaseRenewal?: boolean;
}

interface RecordRow extends KeyRow {
  /** Past its retention and not running: a new request may take the key over. */
  expired_row: SqlBoolean;
  /** Its lease ended while processing this very request (same fingerprint): its owner died, a retry takes over. */
  dead_lease_same_request: SqlBoolean;
}

const NOW = 'UTC_TIMESTAMP(6)';
const inSeconds = (placeholder: string) =>
  `TIMESTAMPADD(MICROSECOND, ROUND(${placeholder} * 1000000), ${NOW})`;

/** The response as the column stores it; too large for the column is refused (see MariadbResponseTooLargeError). */
function responseText(response: StoredResponse): string {
  const text = JSON.stringify(response);
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MARIADB_RESPONSE_BYTES) throw new MariadbResponseTooLargeError(bytes);
  return text;
}

/** MariaDB's ER_LOCK_WAIT_TIMEOUT (innodb_lock_wait_timeout ran out) and ER_LOCK_DEADLOCK. */
const LOCK_WAIT_TIMEOUT = 1205;
const DEADLOCK = 1213;
const isDeadlock = (error: unknown) =>
  hasMariadbErrno(error, DEADLOCK, /Deadlock found when trying to get lock/i);

/** Deadlock victims are retried this many times before the error is thrown. */
const DEADLOCK_RETRIES = 3;

/**
 * Runs one autocommit statement again when InnoDB chose it as a deadlock victim. A victim's statement was rolled
 * back whole, so running it again is what it would have done; the store's writes are all guarded (fenced by the
 * owner, or re-checking the row), so a retry never does more than the first attempt would have. Deadlocks here
 * come from the cleanup's range DELETE (it locks the expires_at index, then the rows) crossing a takeover or a
 * completion (the row, then the index). Inside a transaction the whole transaction is rolled back instead: that
 * error goes up, and `isLockTimeout` makes it a 409.
 */
async function retryingDeadlocks<T>(statement: () => PromiseLike<T>): Promise<T> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await statement();
    } catch (error) {
      if (attempt >= DEADLOCK_RETRIES || !isDeadlock(error)) throw error;
    }
  }
}

/**
 * Why MariaDB, not "MySQL": the lock wait of a transactional claim is bounded per statement with MariaDB's
 * `SET STATEMENT innodb_lock_wait_timeout = n FOR …` (10.1.2+), which leaves the pooled connection's session as
 * it was. MySQL 8 has no such statement (its SET_VAR hint is another syntax), so MySQL is not claimed here.
 * Everything else is the subset both share: INSERT IGNORE, affected rows, LOCK IN SHARE MODE, DELETE … LIMIT.
 */
export const createMariadbIdempotencyStore: StoreOnPrismaClient<MariadbStoreOptions> = (db, options = {}) => {
  const tableName = options.table ?? DEFAULT_IDEMPOTENCY_TABLE;
  const table = quoteMariadbTable(tableName);
  const where = 'scope = ? AND `procedure` = ? AND `key` = ?';
  const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];
  const on = (tx?: SqlExecutor): SqlExecutor => tx ?? db;
  const expiredRow = `(expires_at <= ${NOW} AND NOT (state = 'processing' AND locked_until > ${NOW}))`;
  const deadLeaseSameRequest = `(state = 'processing' AND locked_until <= ${NOW} AND fingerprint = ?)`;

  /** Transactions opened by `transaction()`, with their lock wait bound in whole seconds (InnoDB's unit). */
  const lockWaitSeconds = new WeakMap<object, number>();
  /** Statements inside a `transaction()` that may wait on a row lock carry that transaction's bound. */
  const bounded = (sql: string, tx?: SqlExecutor) => {
    const seconds = tx ? lockWaitSeconds.get(tx) : undefined;
    return seconds === undefined ? sql : `SET STATEMENT innodb_lock_wait_timeout = ${seconds} FOR ${sql}`;
  };

  function refuseOversizedKey(key: RecordKey): void {
    for (const column of ['scope', 'procedure', 'key'] as const) {
      const bytes = Buffer.byteLength(key[column], 'utf8');
      if (bytes > MARIADB_KEY_COLUMN_BYTES[column]) throw new MariadbKeyColumnTooLongError(column, bytes);
    }
  }

  /**
   * The row as it is now. Inside a transaction a locking read (LOCK IN SHARE MODE): InnoDB's plain reads use
   * the transaction's snapshot, which may predate a duplicate's commit that our INSERT IGNORE just waited for.
   */
  async function readRow(request: RecordKey & { fingerprint?: string }, tx?: SqlExecutor) {
    const rows = await on(tx).$queryRawUnsafe<RecordRow[]>(
      bounded(
        `SELECT fingerprint, state, response, lease_owner,
                COALESCE(locked_until > ${NOW}, 0) AS lease_active, created_at, expires_at, replay_count,
                ${expiredRow} AS expired_row, COALESCE(${deadLeaseSameRequest}, 0) AS dead_lease_same_request
         FROM ${table} WHERE ${where}${tx ? ' LOCK IN SHARE MODE' : ''}`,
        tx,
      ),
      request.fingerprint ?? '',
      ...keyParams(request),
    );
    return rows[0] ?? null;
  }

  /** The values a claim writes: a processing row under a lease, or (`response`) a completed one. */
  function claimedValues(request: ClaimRequest) {
    const response = request.response ?? null;
    const columns: Array<[column: string, sql: string, params: unknown[]]> = response
      ? [
          ['state', `'completed'`, []],
          ['response', '?', [responseText(response)]],
          ['http_status', '?', [response.httpStatus]],
          ['lease_owner', 'NULL', []],
          ['locked_until', 'NULL', []],
        ]
      : [
          ['state', `'processing'`, []],
          ['response', 'NULL', []],
          ['http_status', 'NULL', []],
          ['lease_owner', '?', [request.owner]],
          ['locked_until', inSeconds('?'), [request.leaseSeconds]],
        ];
    return {
      sql: columns.map(([, sql]) => sql).join(', '),
      assignments: columns.map(([column, sql]) => `${column} = ${sql}`).join(', '),
      params: columns.flatMap(([, , params]) => params),
    };
  }

  /**
   * The claim is one INSERT IGNORE on the primary key (scope, procedure, key). Why it is atomic under InnoDB: the
   * insert checks the clustered (primary) index for the key and writes its record under an exclusive record lock
   * in one step, so of N concurrent claims exactly one inserts. Each other one finds the duplicate record and
   * takes a shared next-key lock on it; if that record's insert is not committed yet, the lock waits until it
   * commits (the claim then ignores the duplicate) or rolls back (the claim then inserts) — bounded by
   * innodb_lock_wait_timeout. No claim decides from a read. "Claimed vs held" is the affected-row count:
   * 1 inserted, 0 ignored (the driver's found-rows flag changes UPDATE counts, never an INSERT IGNORE's).
   * IGNORE would also turn a too-long value into a truncated one: the key columns are checked first.
   *
   * A duplicate then reads the row (one more round trip, no write) → replay, 409 or 422. An expired row, or a
   * dead lease of the same request, is taken over by an UPDATE whose WHERE re-checks that rule on the row as it
   * is then, under its exclusive lock: of two takeovers, the second finds the row live and updates nothing.
   *
   * The per-principal cap is counted first (a plain read, no lock): a new key is inserted only while the scope
   * has fewer than `max` keys processing under a live lease. Like the Postgres store's, it can overshoot by the
   * number of claims counting at the same instant; once-only execution rests on the primary key alone.
   */
  function claim(request: ClaimRequest, tx?: SqlExecutor): Promise<ClaimResult> {
    refuseOversizedKey(request);
    const values = claimedValues(request);
    const read = async (): Promise<ClaimedRow | null> => {
      const row = await readRow(request, tx);
      return row
        ? {
            record: recordOfRow(request, row),
            expired: isTrue(row.expired_row),
            deadLeaseSameRequest: isTrue(row.dead_lease_same_request),
          }
        : null;
    };
    return claimThrough(
      {
        cap: { counted: 'before', countInFlight: (max) => inFlight(request.scope, max, tx) },
        insert: async () =>
          (await on(tx).$executeRawUnsafe(
            bounded(
              `INSERT IGNORE INTO ${table}
                 (scope, \`procedure\`, \`key\`, fingerprint, state, response, http_status, lease_owner, locked_until,
                  created_at, expires_at, replay_count)
               VALUES (?, ?, ?, ?, ${values.sql}, ${NOW}, ${inSeconds('?')}, 0)`,
              tx,
            ),
            ...keyParams(request),
            request.fingerprint,
            ...values.params,
            request.retentionSeconds,
          )) === 1,
        read,
        // Assignments run left to right and see the ones before them: replay_count reads expires_at first.
        takeOver: async (expiredToo) =>
          (await on(tx).$executeRawUnsafe(
            bounded(
              `UPDATE ${table} SET
                 replay_count = IF(expires_at <= ${NOW}, 0, replay_count),
                 fingerprint = ?, ${values.assignments},
                 created_at = ${NOW}, expires_at = ${inSeconds('?')}
               WHERE ${where} AND ${expiredToo ? `(${expiredRow} OR ${deadLeaseSameRequest})` : deadLeaseSameRequest}`,
              tx,
            ),
            request.fingerprint,
            ...values.params,
            request.retentionSeconds,
            ...keyParams(request),
            request.fingerprint,
          )) === 1,
      },
      request,
    );
  }

  async function inFlight(scope: string, max: number, tx?: SqlExecutor): Promise<number> {
    const rows = await on(tx).$queryRawUnsafe<Array<{ n: number | bigint }>>(
      `SELECT COUNT(*) AS n FROM (
         SELECT 1 FROM ${table} WHERE scope = ? AND state = 'processing' AND locked_until > ${NOW} LIMIT ?) AS live`,
      scope,
      max,
    );
    return Number(rows[0]?.n ?? 0);
  }

  async function renewLease(key: RecordKey, owner: string, leaseSeconds: number): Promise<boolean> {
    // The driver counts matched rows (found rows), so a renewal that lands on the same microsecond still counts.
    const count = await retryingDeadlocks(() =>
      db.$executeRawUnsafe(
        `UPDATE ${table} SET locked_until = ${inSeconds('?')}
       WHERE ${where} AND lease_owner = ? AND state = 'processing'`,
        leaseSeconds,
        ...keyParams(key),
        owner,
      ),
    );
    return count === 1;
  }

  return {
    // A claim that finds the key held writes nothing (its shared read locks end with the transaction, soon
    // after); each transaction has a pooled connection of its own.
    answersDuplicatesAtClaim: true,
    claim: (request, tx) =>
      explainingMissingMariadbTable(tableName, () =>
        tx ? claim(request, tx) : retryingDeadlocks(() => claim(request)),
      ),
    ...(options.leaseRenewal === false ? {} : { renewLease }),
    // InnoDB ends a deadlock victim's whole transaction and the session goes on in autocommit: a procedure that
    // caught that error would COMMIT nothing. Where no completion follows the run to notice (a claim written
    // completed: the consumer's inbox), one round trip asks whether the transaction is still open — unless the
    // executor's own COMMIT already refuses a lost transaction (mariadbPoolExecutor).
    ...((db as { [COMMIT_CHECKED]?: boolean })[COMMIT_CHECKED] === true
      ? {}
      : {
          async checkTransaction(tx: SqlExecutor) {
            const [row] = await tx.$queryRawUnsafe<Array<{ open: number | bigint }>>(
              'SELECT @@in_transaction AS open',
            );
            if (Number(row?.open) !== 1) throw new TransactionLostError();
          },
        }),

    async complete(key, owner, response: StoredResponse, tx?: SqlExecutor) {
      const text = responseText(response);
      const statement = () =>
        on(tx).$executeRawUnsafe(
          `UPDATE ${table} SET state = 'completed', response = ?, http_status = ?, lease_owner = NULL,
           locked_until = NULL
         WHERE ${where} AND lease_owner = ? AND state = 'processing'`,
          text,
          response.httpStatus,
          ...keyParams(key),
          owner,
        );
      return (await (tx ? statement() : retryingDeadlocks(statement))) === 1;
    },

    async release(key, owner) {
      const count = await retryingDeadlocks(() =>
        db.$executeRawUnsafe(
          `DELETE FROM ${table} WHERE ${where} AND lease_owner = ? AND state = 'processing'`,
          ...keyParams(key),
          owner,
        ),
      );
      return count === 1;
    },

    async find(key) {
      const row = await readRow(key);
      return row ? recordOfRow(key, row) : null;
    },

    async countReplay(key, replays) {
      await retryingDeadlocks(() =>
        db.$executeRawUnsafe(
          `UPDATE ${table} SET replay_count = replay_count + ? WHERE ${where}`,
          replays,
          ...keyParams(key),
        ),
      );
    },

    transaction(fn, options) {
      return db.$transaction(
        (tx) => {
          // InnoDB bounds lock waits in whole seconds: round up, so a bound is never shorter than asked.
          lockWaitSeconds.set(tx, Math.max(1, Math.ceil(options.lockTimeoutMs / 1000)));
          return fn(tx);
        },
        { maxWait: options.timeoutMs, timeout: options.timeoutMs + options.lockTimeoutMs },
      );
    },

    // A deadlock victim is a claim that lost a race for the same row (two takeovers of one expired key in
    // transactional mode, each holding the shared lock its INSERT IGNORE took): the same "still in progress".
    isLockTimeout: (error) =>
      hasMariadbErrno(error, LOCK_WAIT_TIMEOUT, /Lock wait timeout exceeded/i) || isDeadlock(error),

    deleteExpiredBatch: (batchSize) =>
      explainingMissingMariadbTable(tableName, () =>
        retryingDeadlocks(() =>
          db.$executeRawUnsafe(
            `DELETE FROM ${table}
           WHERE expires_at <= ${NOW} AND NOT (state = 'processing' AND locked_until > ${NOW})
           ORDER BY expires_at LIMIT ?`,
            batchSize,
          ),
        ),
      ),
  };
};
