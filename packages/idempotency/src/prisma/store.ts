/**
 * The Postgres store behind Prisma. The claim is one `INSERT … ON CONFLICT … RETURNING` statement on the
 * primary key (scope, procedure, key): whoever inserts (or atomically takes over an expired row) owns the
 * key; everyone else reads what is there. All times come from the database's now().
 */
import { tooManyInFlightError } from '../core/errors.ts';
import type { IdempotencyRecord, RecordKey, StoredResponse } from '../core/record.ts';
import type { ClaimRequest, ClaimResult, IdempotencyStore, TransactionOptions } from '../core/store.ts';
import type { PrismaClientLike, PrismaTransactionLike, SqlExecutor } from './client.ts';

export interface PrismaStoreOptions {
  /** The table (see the README for the model). Default `idempotency_keys`. */
  table?: string;
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

const SAVEPOINT = 'idem_procedure';

export function createPrismaIdempotencyStore<TClient extends PrismaClientLike>(
  db: TClient,
  options: PrismaStoreOptions = {},
): IdempotencyStore<PrismaTransactionLike<TClient>> {
  const table = quoteTable(options.table ?? 'idempotency_keys');
  const where = 'scope = $1 and procedure = $2 and key = $3';
  const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];
  const on = (tx?: SqlExecutor): SqlExecutor => tx ?? db;

  const selectRecord = `
    select scope, procedure, key, fingerprint, state, response, lease_owner,
           coalesce(locked_until > now(), false) as lease_active, created_at, expires_at, replay_count
    from ${table} where ${where}`;

  async function find(key: RecordKey, tx?: SqlExecutor): Promise<IdempotencyRecord | null> {
    const rows = await on(tx).$queryRawUnsafe<RecordRow[]>(selectRecord, ...keyParams(key));
    const row = rows[0];
    return row ? toRecord(row) : null;
  }

  // Insert, or take over a row that has expired (a new request) or whose lease ended while still processing
  // the same request (its owner died). Anything else is left alone and read afterwards.
  const insertClaim = `
    insert into ${table} as k
        (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at, replay_count)`;
  const claimValues = `$1, $2, $3, $4, 'processing', $5::uuid, now() + make_interval(secs => $6::double precision),
        now(), now() + make_interval(secs => $7::double precision), 0`;
  const onConflictSet = `
    on conflict (scope, procedure, key) do update set
      fingerprint = excluded.fingerprint, state = 'processing', response = null, http_status = null,
      lease_owner = excluded.lease_owner, locked_until = excluded.locked_until,
      created_at = now(), expires_at = excluded.expires_at,
      replay_count = case when k.expires_at <= now() then 0 else k.replay_count end`;
  // Fix: an expired row whose lease is still live is a request still running (retention < lease): taking it
  // over would run the key twice at once. Same rule as deleteExpiredBatch.
  const expiredRow = `(k.expires_at <= now() and not (k.state = 'processing' and k.locked_until > now()))`;
  const deadLeaseSameRequest = `(k.state = 'processing' and k.locked_until <= now() and k.fingerprint = excluded.fingerprint)`;

  const claimUncapped = `${insertClaim} values (${claimValues}) ${onConflictSet}
    where ${expiredRow} or ${deadLeaseSameRequest}
    returning (xmax = 0) as inserted`;

  /*
   * The per-principal cap on keys in flight, in the SAME statement as the claim: the new row is inserted only
   * if the scope has fewer than $8 keys `processing` under a live lease. A duplicate of a key that exists goes
   * through unconditionally (to ON CONFLICT, which replays / 409s / 422s as usual, or takes over a dead lease of
   * the same request); only a NEW key — no row, or an expired row being reused — is subject to the cap.
   *
   * Race trade-off: the count reads this statement's snapshot, so N claims of one principal that run at the
   * very same moment do not see each other's uncommitted rows and may overshoot the cap by up to N − 1. That is
   * acceptable: the cap is a rate limit against one caller hogging the server (pool, provider), not a
   * correctness guarantee — once-only execution still rests on the primary key alone, which this does not
   * touch. An exact cap would need a per-scope lock (pg_advisory_xact_lock + a second statement in its own
   * transaction, i.e. two more round trips on every claim, and in transactional mode the lock would be held for
   * the whole procedure, serializing the principal) or a counter row. Likewise, in transactional mode a claim is
   * invisible to others until it commits — already completed — so the count only ever sees external-mode keys.
   * The count is bounded by LIMIT $8 and walks the primary key's (scope, …) prefix; a principal with very many
   * completed keys inside the retention window would be served better by a partial index
   * `(scope) where state = 'processing'`.
   */
  const claimCapped = `
    with in_flight as (
      select count(*)::int as n from (
        select 1 from ${table}
        where scope = $1 and state = 'processing' and locked_until > now()
        limit $8::int) as live
    ), existing as (
      select ${expiredRow} as expired from ${table} as k where ${where}
    ), claimed as (
      ${insertClaim}
      select ${claimValues}
      where (select n from in_flight) < $8::int or exists (select 1 from existing)
      ${onConflictSet}
      where (${expiredRow} and (select n from in_flight) < $8::int) or ${deadLeaseSameRequest}
      returning (xmax = 0) as inserted
    )
    select (select inserted from claimed) as inserted,
           (select n from in_flight) >= $8::int as at_cap,
           (select expired from existing) as existing_expired`;

  async function claim(request: ClaimRequest, tx?: SqlExecutor): Promise<ClaimResult> {
    const params = [
      request.scope,
      request.procedure,
      request.key,
      request.fingerprint,
      request.owner,
      request.leaseSeconds,
      request.retentionSeconds,
    ];
    const cap = request.inFlightCap;
    let claimed: { inserted: boolean | null } | undefined;
    if (cap && Number.isFinite(cap.max)) {
      const rows = await on(tx).$queryRawUnsafe<
        Array<{ inserted: boolean | null; at_cap: boolean; existing_expired: boolean | null }>
      >(claimCapped, ...params, cap.max);
      const row = rows[0];
      // Refused by the cap: a new key (no row, or an expired one to reuse) while the scope is at its cap.
      if (row && row.inserted === null && row.at_cap && row.existing_expired !== false)
        throw tooManyInFlightError(cap.max, cap.retryAfterSeconds);
      claimed = row?.inserted === null ? undefined : row;
    } else {
      const rows = await on(tx).$queryRawUnsafe<Array<{ inserted: boolean }>>(claimUncapped, ...params);
      claimed = rows[0];
    }
    if (claimed) return { claimed: true, takeover: !claimed.inserted };
    const record = await find(request, tx);
    // Only possible if the row was deleted between the two statements (cleanup): claim again.
    if (!record) return claim(request, tx);
    return { claimed: false, record };
  }

  return {
    claim,

    async complete(key, owner, response, tx?: SqlExecutor) {
      const count = await on(tx).$executeRawUnsafe(
        `update ${table} set state = 'completed', response = $5, http_status = $6,
           lease_owner = null, locked_until = null
         where ${where} and lease_owner = $4::uuid and state = 'processing'`,
        ...keyParams(key),
        owner,
        JSON.stringify(response),
        response.httpStatus,
      );
      return count === 1;
    },

    async release(key, owner) {
      const count = await db.$executeRawUnsafe(
        `delete from ${table} where ${where} and lease_owner = $4::uuid and state = 'processing'`,
        ...keyParams(key),
        owner,
      );
      return count === 1;
    },

    find: (key) => find(key),

    async countReplay(key) {
      await db.$executeRawUnsafe(
        `update ${table} set replay_count = replay_count + 1 where ${where}`,
        ...keyParams(key),
      );
    },

    transaction<T>(fn: (tx: PrismaTransactionLike<TClient>) => Promise<T>, options: TransactionOptions) {
      return db.$transaction(
        async (tx) => {
          // Bounds the wait on a concurrent duplicate's uncommitted claim (SET LOCAL: this transaction only).
          await tx.$executeRawUnsafe(
            `set local lock_timeout = ${Math.max(1, Math.round(options.lockTimeoutMs))}`,
          );
          return fn(tx);
        },
        { maxWait: options.timeoutMs, timeout: options.timeoutMs + options.lockTimeoutMs },
      );
    },

    async savepoint(tx) {
      await tx.$executeRawUnsafe(`savepoint ${SAVEPOINT}`);
    },

    async rollbackToSavepoint(tx) {
      await tx.$executeRawUnsafe(`rollback to savepoint ${SAVEPOINT}`);
    },

    isLockTimeout: (error) => hasPostgresCode(error, '55P03'),

    async deleteExpiredBatch(batchSize) {
      // SKIP LOCKED: two cleanups running at once split the work instead of waiting on each other.
      return db.$executeRawUnsafe(
        `delete from ${table} where ctid in (
           select ctid from ${table}
           where expires_at <= now() and not (state = 'processing' and locked_until > now())
           limit $1 for update skip locked)`,
        batchSize,
      );
    },
  };
}

function toRecord(row: RecordRow): IdempotencyRecord {
  return {
    scope: row.scope,
    procedure: row.procedure,
    key: row.key,
    fingerprint: row.fingerprint,
    state: row.state === 'completed' ? 'completed' : 'processing',
    response: row.response === null ? null : (JSON.parse(row.response) as StoredResponse),
    leaseOwner: row.lease_owner,
    leaseActive: row.lease_active,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    replayCount: row.replay_count,
  };
}

/** Finds a Postgres SQLSTATE anywhere in an error's chain (Prisma wraps driver errors differently by path). */
function hasPostgresCode(error: unknown, sqlState: string): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const candidate = current as {
      code?: unknown;
      originalCode?: unknown;
      message?: unknown;
      cause?: unknown;
      meta?: unknown;
    };
    if (candidate.code === sqlState || candidate.originalCode === sqlState) return true;
    if (typeof candidate.message === 'string' && candidate.message.includes(sqlState)) return true;
    if (typeof candidate.message === 'string' && /lock timeout/i.test(candidate.message)) return true;
    current =
      candidate.cause ?? (candidate.meta as { driverAdapterError?: unknown } | undefined)?.driverAdapterError;
  }
  return false;
}

function quoteTable(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/.test(name))
    throw new Error(`Invalid table name: ${name}`);
  return name
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}
