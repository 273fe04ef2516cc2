/**
 * The Postgres store behind Prisma. The claim is one `INSERT … ON CONFLICT … RETURNING` statement on the
 * primary key (scope, procedure, key): whoever inserts (or atomically takes over an expired row) owns the
 * key; everyone else reads what is there. All times come from the database's now().
 */
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

  async function claim(request: ClaimRequest, tx?: SqlExecutor): Promise<ClaimResult> {
    // Inserts, or takes over a row that has expired (a new request) or whose lease ended while still
    // processing the same request (its owner died). Anything else is left alone and read below.
    const rows = await on(tx).$queryRawUnsafe<Array<{ inserted: boolean }>>(
      `insert into ${table} as k
           (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at, replay_count)
         values ($1, $2, $3, $4, 'processing', $5::uuid, now() + make_interval(secs => $6::double precision), now(),
                 now() + make_interval(secs => $7::double precision), 0)
         on conflict (scope, procedure, key) do update set
           fingerprint = excluded.fingerprint, state = 'processing', response = null, http_status = null,
           lease_owner = excluded.lease_owner, locked_until = excluded.locked_until,
           created_at = now(), expires_at = excluded.expires_at,
           replay_count = case when k.expires_at <= now() then 0 else k.replay_count end
         -- Fix: an expired row whose lease is still live is a request still running (retention < lease):
         -- taking it over would run the key twice at once. Same rule as deleteExpiredBatch.
         where (k.expires_at <= now() and not (k.state = 'processing' and k.locked_until > now()))
            or (k.state = 'processing' and k.locked_until <= now() and k.fingerprint = excluded.fingerprint)
         returning (xmax = 0) as inserted`,
      request.scope,
      request.procedure,
      request.key,
      request.fingerprint,
      request.owner,
      request.leaseSeconds,
      request.retentionSeconds,
    );
    const claimed = rows[0];
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
