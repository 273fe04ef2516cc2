/**
 * The SQLite key table through any Prisma 7 client on Prisma's better-sqlite3 adapter (provider "sqlite"): the
 * same contract as the Postgres store — claim, run once, complete or release fenced by the lease owner, takeover
 * of an expired key or a dead lease, the per-principal in-flight cap — with times from SQLite's clock.
 *
 * Why the claim is atomic: SQLite has ONE writer at a time per database file. The claim's first statement is an
 * INSERT on the primary key (scope, procedure, key), which takes the database's write lock before it looks at the
 * key, and the claim's later statements (the read of the existing row, the rare takeover UPDATE) run in the same
 * transaction under that same lock: no other connection, in this process or another, can insert, take over or
 * complete the key in between. Every decision is still one statement whose WHERE re-checks the rule (never a read
 * whose answer a later write trusts without the lock). The claim is `INSERT … ON CONFLICT DO NOTHING RETURNING`
 * and then, for a reclaimable row, `UPDATE … WHERE <takeover rule> RETURNING`, rather than one `ON CONFLICT DO UPDATE … WHERE
 * <takeover rule> RETURNING`: SQLite's RETURNING shows only the row after the change, so that single statement
 * could not tell a new key from a takeover, which the handler reports.
 *
 * Why every statement runs in a transaction: the adapter has one connection per client, and a query sent outside
 * a transaction while another request's interactive transaction is open runs on that connection INSIDE that
 * transaction (and is rolled back with it). So the store sends nothing outside a transaction: its own short ones
 * wait for the adapter's connection lock like any transaction.
 *
 * "Lock timeout": a statement that needs the write lock while another connection holds it waits up to the
 * connection's `busy_timeout` (better-sqlite3's `timeout` option, default 5 000 ms), then fails with SQLITE_BUSY;
 * a transaction of this process waits up to `lockTimeoutMs` for the client's connection (Prisma's `maxWait`, then
 * P2028). Both are `isLockTimeout` → 409 + Retry-After: the key's first request still holds the one writer.
 */

import type { IdempotencyRecord, RecordKey, StoredResponse } from '../core/record.ts';
import type { ClaimRequest, ClaimResult } from '../core/store.ts';
import { claimThrough, inFlightCapOf } from '../stores/claim-flow.ts';
import { isTrue, type KeyRow, recordOfRow } from '../stores/key-row.ts';
import { KeyTableMissingError, missingTableExplainer } from '../stores/missing-table.ts';
import type { SqlExecutor, StoreOnPrismaClient } from '../stores/prisma-client.ts';
import {
  bindNamed,
  DEFAULT_SQLITE_IDEMPOTENCY_TABLE,
  isSqliteBusy,
  isSqliteMissingTable,
  isTransactionStartTimeout,
  quoteSqliteTable,
  SQLITE_NOW,
  sqliteNowPlus,
} from './sql.ts';

export interface SqliteStoreOptions {
  /** The table (see `sqliteIdempotencyKeysSchema()`). Default `idempotency_keys`. */
  table?: string;
  /** External mode renews the owner's lease while its procedure runs. Default true (`false`: tests only). */
  leaseRenewal?: boolean;
  /**
   * How long the store's own short transactions (external-mode claims, completions, reads, cleanup) wait for
   * this client's connection while another transaction of this process holds it. Default 5 000 ms.
   */
  connectionWaitMs?: number;
}

/** Where the table is missing and how to create it, the end of `SqliteIdempotencyTableMissingError`'s message. */
const SQLITE_TABLE_HOW_TO =
  'SQLite database. Create it: add `sqliteIdempotencyKeysSchema().prismaModel` to a schema.prisma whose ' +
  'provider is "sqlite" and run `prisma migrate dev`, or run each of `sqliteIdempotencyKeysSchema().statements`.';

export class SqliteIdempotencyTableMissingError extends KeyTableMissingError {
  override readonly name = 'SqliteIdempotencyTableMissingError';
  protected override whereAndHow(): string {
    return SQLITE_TABLE_HOW_TO;
  }
}

const explainingMissingTable = missingTableExplainer(
  isSqliteMissingTable,
  SqliteIdempotencyTableMissingError,
);

/** A row as the adapter returns it, with its key: integers may come back as bigint, times as text. */
interface RecordRow extends KeyRow {
  scope: string;
  procedure: string;
  key: string;
}

type ClaimRow = RecordRow & { reclaimable_expired: number | bigint; reclaimable_dead_lease: number | bigint };

export const createSqliteIdempotencyStore: StoreOnPrismaClient<SqliteStoreOptions> = (db, options = {}) => {
  const tableName = options.table ?? DEFAULT_SQLITE_IDEMPOTENCY_TABLE;
  const table = quoteSqliteTable(tableName);
  const connectionWaitMs = options.connectionWaitMs ?? 5_000;
  const NOW = SQLITE_NOW;
  const where = 'scope = @scope and procedure = @procedure and key = @key';
  const keyValues = (key: RecordKey) => ({ scope: key.scope, procedure: key.procedure, key: key.key });
  const run = async (on: SqlExecutor, sql: string, values: Record<string, unknown>): Promise<number> =>
    Number(await on.$executeRawUnsafe(...bindNamed(sql, values)));
  const query = async <T>(on: SqlExecutor, sql: string, values: Record<string, unknown>): Promise<T[]> =>
    on.$queryRawUnsafe<T[]>(...bindNamed(sql, values));

  /** Runs `fn` in a short transaction of the store's own (see the file comment: never outside one). */
  function own<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return db.$transaction((tx) => fn(tx as SqlExecutor), {
      maxWait: connectionWaitMs,
      timeout: connectionWaitMs + 10_000,
    });
  }
  const explained = <T>(statement: () => Promise<T>): Promise<T> =>
    explainingMissingTable(tableName, statement);

  // Same rules as the Postgres store: an expired row may be reused by any request unless its lease is still live
  // (a request still running past its retention); a dead lease may be taken over by the same request only.
  const expiredRow = `(expires_at <= ${NOW} and not (state = 'processing' and locked_until > ${NOW}))`;
  const deadLeaseSameRequest = `(state = 'processing' and locked_until <= ${NOW} and fingerprint = @fingerprint)`;
  const leaseActive = `coalesce(locked_until > ${NOW}, 0)`;
  const recordColumns = `scope, procedure, key, fingerprint, state, response, lease_owner,
    ${leaseActive} as lease_active, created_at, expires_at, replay_count`;

  function claimOn(on: SqlExecutor, request: ClaimRequest): Promise<ClaimResult> {
    const cap = inFlightCapOf(request);
    const response = request.response ?? null;
    const values = {
      ...keyValues(request),
      fingerprint: request.fingerprint,
      retention: request.retentionSeconds,
      owner: request.owner,
      lease: request.leaseSeconds,
      response: response ? JSON.stringify(response) : null,
      httpStatus: response?.httpStatus ?? null,
      cap: cap?.max ?? null,
    };
    const [state, responseSql, httpStatus, leaseOwner, lockedUntil] = response
      ? [`'completed'`, '@response', '@httpStatus', 'null', 'null']
      : [`'processing'`, 'null', 'null', '@owner', sqliteNowPlus('@lease')];
    // Exact under the write lock (one writer: no concurrent claim is uncounted). Transactional claims commit
    // completed, so only external-mode keys are ever counted, as with Postgres.
    const underCap = cap
      ? `(select count(*) from (select 1 from ${table} where scope = @scope and state = 'processing'
           and locked_until > ${NOW} limit @cap)) < @cap`
      : '1';
    const expires = sqliteNowPlus('@retention');

    return claimThrough(
      {
        cap: { counted: 'inside' },
        // The claim: the unique key decides. This INSERT takes the write lock first (even when it inserts
        // nothing), so what follows in this transaction sees the key as no other writer can change it. (Its WHERE
        // is also what SQLite needs to parse INSERT … SELECT … ON CONFLICT.)
        insert: async () =>
          (
            await query(
              on,
              `insert into ${table}
                 (scope, procedure, key, fingerprint, state, response, http_status, lease_owner, locked_until,
                  created_at, expires_at, replay_count)
               select @scope, @procedure, @key, @fingerprint, ${state}, ${responseSql}, ${httpStatus}, ${leaseOwner},
                      ${lockedUntil}, ${NOW}, ${expires}, 0
               where ${underCap}
               on conflict (scope, procedure, key) do nothing
               returning 1 as inserted`,
              values,
            )
          ).length > 0,
        // Under the write lock the INSERT took, no other writer can change the row before this transaction ends:
        // what this reads is what a takeover would replace.
        read: async () => {
          const [row] = await query<ClaimRow>(
            on,
            `select ${recordColumns}, ${expiredRow} as reclaimable_expired, ${deadLeaseSameRequest} as reclaimable_dead_lease
             from ${table} where ${where}`,
            values,
          );
          return row
            ? {
                record: recordOfRow(row, row),
                expired: isTrue(row.reclaimable_expired),
                deadLeaseSameRequest: isTrue(row.reclaimable_dead_lease),
              }
            : null;
        },
        // Rare. The UPDATE re-checks the rule itself, and the cap for an expired key (a new one).
        takeOver: async () =>
          (
            await query(
              on,
              `update ${table} set
                 fingerprint = @fingerprint, state = ${state}, response = ${responseSql}, http_status = ${httpStatus},
                 lease_owner = ${leaseOwner}, locked_until = ${lockedUntil}, created_at = ${NOW}, expires_at = ${expires},
                 replay_count = case when expires_at <= ${NOW} then 0 else replay_count end
               where ${where} and ((${expiredRow} and ${underCap}) or ${deadLeaseSameRequest})
               returning 1 as updated`,
              values,
            )
          ).length > 0,
      },
      request,
    );
  }

  async function renewLease(key: RecordKey, owner: string, leaseSeconds: number): Promise<boolean> {
    const count = await own((tx) =>
      run(
        tx,
        `update ${table} set locked_until = ${sqliteNowPlus('@lease')}
         where ${where} and lease_owner = @owner and state = 'processing'`,
        { ...keyValues(key), owner, lease: leaseSeconds },
      ),
    );
    return Number(count) === 1;
  }

  const complete = (on: SqlExecutor, key: RecordKey, owner: string, response: StoredResponse) =>
    run(
      on,
      `update ${table} set state = 'completed', response = @response, http_status = @httpStatus,
         lease_owner = null, locked_until = null
       where ${where} and lease_owner = @owner and state = 'processing'`,
      { ...keyValues(key), owner, response: JSON.stringify(response), httpStatus: response.httpStatus },
    );

  const find = async (on: SqlExecutor, key: RecordKey): Promise<IdempotencyRecord | null> => {
    const [row] = await query<RecordRow>(
      on,
      `select ${recordColumns} from ${table} where ${where}`,
      keyValues(key),
    );
    return row ? recordOfRow(row, row) : null;
  };

  return {
    claim: (request, tx) =>
      explained(() => (tx ? claimOn(tx, request) : own((own) => claimOn(own, request)))),
    ...(options.leaseRenewal === false ? {} : { renewLease }),

    async complete(key, owner, response, tx?: SqlExecutor) {
      const count = await (tx
        ? complete(tx, key, owner, response)
        : own((own) => complete(own, key, owner, response)));
      return Number(count) === 1;
    },

    async release(key, owner) {
      const count = await own((tx) =>
        run(tx, `delete from ${table} where ${where} and lease_owner = @owner and state = 'processing'`, {
          ...keyValues(key),
          owner,
        }),
      );
      return Number(count) === 1;
    },

    find: (key) => own((tx) => find(tx, key)),

    async countReplay(key, replays) {
      await own((tx) =>
        run(tx, `update ${table} set replay_count = replay_count + @replays where ${where}`, {
          ...keyValues(key),
          replays,
        }),
      );
    },

    transaction(fn, options) {
      // Deferred (Prisma's BEGIN): the handler's first statement in it is the claim's INSERT, a write, so the
      // transaction takes the write lock at once, waiting up to busy_timeout — it never reads first and then
      // has to upgrade (an upgrade that meets another writer fails at once with SQLITE_BUSY, busy_timeout or
      // not). maxWait bounds the wait for this client's one connection: the in-process side of the lock wait.
      return db.$transaction(fn, {
        maxWait: options.lockTimeoutMs,
        timeout: options.timeoutMs + options.lockTimeoutMs,
      });
    },

    isLockTimeout: (error) => isSqliteBusy(error) || isTransactionStartTimeout(error),

    deleteExpiredBatch: (batchSize) =>
      explained(async () =>
        Number(
          await own((tx) =>
            // One writer: two cleanups never delete the same row twice; each batch is one short transaction.
            run(
              tx,
              `delete from ${table} where rowid in (select rowid from ${table} where ${expiredRow} limit @batch)`,
              {
                batch: batchSize,
              },
            ),
          ),
        ),
      ),
  };
};
