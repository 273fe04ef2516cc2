/**
 * The Postgres store behind Prisma. The claim is one `INSERT … ON CONFLICT … RETURNING` statement on the
 * primary key (scope, procedure, key): whoever inserts (or atomically takes over an expired row) owns the
 * key; everyone else reads what is there. All times come from the database's now(). In external mode the owner
 * renews its lease through the same table (`renewLease`) while its procedure runs. The statements are in
 * store-sql.ts; this file runs them (through Prisma, or the fast path) and reads their answers.
 */

import { tooManyInFlightError } from '../core/errors.ts';
import type { IdempotencyRecord, RecordKey, StoredResponse } from '../core/record.ts';
import type { ClaimRequest, ClaimResult } from '../core/store.ts';
import { COMMIT_CHECKED } from '../stores/pooled-executor.ts';
import type { SqlExecutor, StoreOnPrismaClient } from '../stores/prisma-client.ts';
import { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
import { expiredBatchDelete } from './expired-batch.ts';
import { fastPathOf } from './fast-path/adapter.ts';
import { explainingMissingTable } from './missing-table.ts';
import { hasPostgresCode, quoteTable } from './sql.ts';
import { type ClaimValues, type Statement, storeStatements } from './store-sql.ts';

export interface PrismaStoreOptions {
  /** The table (see the README for the model: `idempotencyKeysSchema()`). Default `idempotency_keys`. */
  table?: string;
  /**
   * External mode renews the owner's lease while its procedure runs (`renewLease`), so a slow but live request
   * keeps its key. Default true. `false` leaves `renewLease` out: only for tests that need a lease to end under
   * a running request (a takeover while the first execution is still going).
   */
  leaseRenewal?: boolean;
  /**
   * The client's driver adapter factory wrapped by `withIdempotencyFastPath` (the same object given to
   * `new PrismaClient({ adapter })`): the store's statements then go straight to that adapter, on the
   * transaction Prisma opened, instead of through Prisma's raw-query path (fast-path/adapter.ts). Default: through Prisma.
   */
  fastPath?: object;
}

interface RecordRow {
  scope: string;
  procedure: string;
  key: string;
  fingerprint: string;
  state: string;
  response: string | null;
  lease_owner: string | null;
  lease_active: boolean;
  created_at: Date;
  expires_at: Date;
  replay_count: number;
}

/** A claim's answer: `inserted` when it claimed, else the live row it found (all null when there was none). */
type ClaimRow = { [K in keyof RecordRow]: RecordRow[K] | null } & {
  inserted: boolean;
  reclaimable: boolean | null;
  at_cap: boolean;
};

export const createPrismaIdempotencyStore: StoreOnPrismaClient<PrismaStoreOptions> = (db, options = {}) => {
  const tableName = options.table ?? DEFAULT_IDEMPOTENCY_TABLE;
  const table = quoteTable(tableName);
  const deleteExpired = expiredBatchDelete(tableName);
  const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];
  const fastPath = options.fastPath === undefined ? undefined : fastPathOf(options.fastPath);
  if (options.fastPath !== undefined && !fastPath)
    throw new TypeError(
      'createPrismaIdempotencyStore: fastPath must be an adapter from withIdempotencyFastPath',
    );
  const executorFor = (tx?: SqlExecutor): SqlExecutor => fastPath?.executor(tx) ?? tx ?? db;
  // Whether a COMMIT that Postgres answered with ROLLBACK (a failed statement aborted the transaction) rejects:
  // on the fast path (CommitRolledBackError) and on node-postgres' pool (pg/pool-executor.ts); not through
  // Prisma's own raw path, which reports it as a commit.
  const commitChecked =
    fastPath !== undefined || (db as { [COMMIT_CHECKED]?: boolean })[COMMIT_CHECKED] === true;

  const sql = storeStatements(table);
  async function find(key: RecordKey, tx?: SqlExecutor): Promise<IdempotencyRecord | null> {
    const rows = await executorFor(tx).$queryRawUnsafe<RecordRow[]>(sql.selectRecord, ...keyParams(key));
    const row = rows[0];
    return row ? toRecord(row) : null;
  }

  function run<T>(built: Statement, request: ClaimRequest, values: ClaimValues, tx?: SqlExecutor) {
    return executorFor(tx).$queryRawUnsafe<T[]>(
      built.sql,
      request.scope,
      request.procedure,
      request.key,
      request.fingerprint,
      ...built.params.map((param) => values[param]),
    );
  }

  /** Transactions opened by `transaction()`, with the lock timeout their first claim must set. */
  const lockTimeouts = new WeakMap<object, number>();

  async function claim(request: ClaimRequest, tx?: SqlExecutor): Promise<ClaimResult> {
    const cap = request.inFlightCap && Number.isFinite(request.inFlightCap.max) ? request.inFlightCap : null;
    const lockTimeoutMs = tx ? lockTimeouts.get(tx) : undefined;
    const response = request.response ?? null;
    const variant = {
      capped: cap !== null,
      completed: response !== null,
      lockTimeout: lockTimeoutMs !== undefined,
    };
    const values: ClaimValues = {
      retentionSeconds: request.retentionSeconds,
      owner: request.owner,
      leaseSeconds: request.leaseSeconds,
      cap: cap?.max,
      lockTimeout: String(Math.max(1, Math.round(lockTimeoutMs ?? 0))),
      response: JSON.stringify(response),
      httpStatus: response?.httpStatus,
    };
    const [row] = await run<ClaimRow>(sql.claim('claim', variant), request, values, tx);
    if (row?.inserted) return { claimed: true, takeover: false };
    if (row && row.scope !== null) {
      // A live row from our snapshot: nothing was written, nothing locked.
      if (!row.reclaimable) return { claimed: false, record: toRecord(row) };
      const [updated] = await run<{ updated: number }>(sql.claim('takeover', variant), request, values, tx);
      if (updated) return { claimed: true, takeover: true };
      // Not taken over: the cap, or the row changed since our snapshot. Read it as it is now (below).
    }
    // Refused by the cap: a new key (no row, or an expired one to reuse: a live row returned above) while the
    // scope is at its cap.
    if (cap && row?.at_cap) throw tooManyInFlightError(cap.max, cap.retryAfterSeconds);
    // A race: the key was inserted (or taken over) by a transaction that committed after our snapshot.
    const record = await find(request, tx);
    // Only possible if the row was deleted between the two statements (cleanup): claim again.
    if (!record) return claim(request, tx);
    return { claimed: false, record };
  }

  async function renewLease(key: RecordKey, owner: string, leaseSeconds: number): Promise<boolean> {
    const count = await executorFor().$executeRawUnsafe(sql.renew, ...keyParams(key), owner, leaseSeconds);
    return count === 1;
  }

  return {
    // A claim that finds the key held writes nothing; each transaction has a pooled connection of its own.
    answersDuplicatesAtClaim: true,
    // Every keyed request starts with a claim: a missing table is reported there, by name.
    claim: (request, tx) => explainingMissingTable(tableName, () => claim(request, tx)),
    ...(options.leaseRenewal === false ? {} : { renewLease }),
    // A statement in an aborted transaction fails (25P02): one cheap round trip where the COMMIT would not say.
    ...(commitChecked
      ? {}
      : {
          async checkTransaction(tx: SqlExecutor) {
            await executorFor(tx).$queryRawUnsafe('select 1');
          },
        }),

    async complete(key, owner, response, tx?: SqlExecutor) {
      const values = [...keyParams(key), owner, JSON.stringify(response), response.httpStatus];
      // Inside a transaction the completion can travel with the COMMIT (one round trip fewer): it then either
      // matched the row or rolled everything back, so true is the only answer a caller can observe.
      if (tx && fastPath?.deferUntilCommit(tx, sql.completeAtCommit, values)) return true;
      const count = await executorFor(tx).$executeRawUnsafe(sql.complete, ...values);
      return count === 1;
    },

    async release(key, owner) {
      const count = await executorFor().$executeRawUnsafe(sql.release, ...keyParams(key), owner);
      return count === 1;
    },

    find: (key) => find(key),

    async countReplay(key, replays) {
      await executorFor().$executeRawUnsafe(sql.countReplay, ...keyParams(key), replays);
    },

    transaction(fn, options) {
      const open = () =>
        db.$transaction(
          (tx) => {
            fastPath?.bind(tx);
            // Bounds the wait on a concurrent duplicate's uncommitted claim: set by the claim statement itself
            // (no extra round trip), for this transaction only.
            lockTimeouts.set(tx, options.lockTimeoutMs);
            return fn(tx);
          },
          { maxWait: options.timeoutMs, timeout: options.timeoutMs + options.lockTimeoutMs },
        );
      return fastPath ? fastPath.run(open) : open();
    },

    isLockTimeout: (error) => hasPostgresCode(error, '55P03', /lock timeout/i),

    deleteExpiredBatch: (batchSize) => explainingMissingTable(tableName, () => deleteExpired(db, batchSize)),
  };
};

function toRecord(row: RecordRow | ClaimRow): IdempotencyRecord {
  return {
    scope: row.scope ?? '',
    procedure: row.procedure ?? '',
    key: row.key ?? '',
    fingerprint: row.fingerprint ?? '',
    state: row.state === 'completed' ? 'completed' : 'processing',
    response: row.response === null ? null : (JSON.parse(row.response) as StoredResponse),
    leaseOwner: row.lease_owner,
    leaseActive: row.lease_active ?? false,
    createdAt: row.created_at ?? new Date(0),
    expiresAt: row.expires_at ?? new Date(0),
    replayCount: row.replay_count ?? 0,
  };
}
