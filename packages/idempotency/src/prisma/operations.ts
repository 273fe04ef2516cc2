/**
 * Operating the key table: what admin tools, metrics and a cleanup job need, so that no app writes its own SQL
 * against the table. Lease states are judged by the database's clock — the same now() the store claims and
 * takes over with. A row is never returned with its stored response body, only the body's size.
 */

import { LOG_KEY_HASH_LENGTH, logKeyHash } from '../core/log-key-hash.ts';
import type { RecordKey, RecordState } from '../core/record.ts';
import { type CleanupResult, cleanupExpiredKeys } from '../stores/cleanup.ts';
import type { PrismaClientLike, PrismaTransactionLike, SqlExecutor } from '../stores/prisma-client.ts';
import { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
import { EVICTED_KEYS_CHANNEL, evictionNotice } from './evicted-keys.ts';
import { expiredBatchDelete } from './expired-batch.ts';
import { quoteTable } from './sql.ts';

/** processing under a live lease | processing with its lease ended (its owner is gone) | completed */
export type KeyStatus = 'in_flight' | 'stuck' | 'completed';

export interface IdempotencyKeyRow extends RecordKey {
  fingerprint: string;
  state: RecordState;
  status: KeyStatus;
  httpStatus: number | null;
  /** Size of the stored response, in bytes; the body itself is never read here. */
  responseBytes: number | null;
  leaseOwner: string | null;
  lockedUntil: Date | null;
  createdAt: Date;
  expiresAt: Date;
  /** Past its retention: the next request with this key runs as new (and the cleanup will delete it). */
  expired: boolean;
  replayCount: number;
  /** The key's `keyHash` in the idempotency events and log lines (`logKeyHash`). */
  keyHash: string;
  /** Changes whenever the row is claimed, taken over or completed: `evict` refuses a row that moved on. */
  version: string;
}

/** Which keys `findKeys` returns. Absent: every key. */
export type KeyFilter =
  | { key: string }
  | { keyPrefix: string }
  /** A principal's keys (one scope or several), optionally of one procedure. */
  | { scope: string | readonly string[]; procedure?: string }
  /** The `keyHash` of an event or log line (16 hex digits). */
  | { keyHash: string }
  | { status: Exclude<KeyStatus, 'completed'> };

export interface FindKeysOptions {
  /** At most this many rows (1–500). Default 50. */
  limit?: number;
  /**
   * `newest` (default): by creation time, newest first. `latest-expiry`: by expiry, latest first — the same
   * order for keys with the same retention, and it walks the `expires_at` index instead of sorting the table.
   */
  order?: 'newest' | 'latest-expiry';
}

export interface KeyCounts {
  /** Processing under a live lease: requests running now. */
  inFlight: number;
  /** Processing with the lease ended: owners that died mid-request (a retry of the same request takes over). */
  stuck: number;
}

/** Why an eviction can go ahead: the key was stuck, or the caller confirmed evicting a live or completed one. */
export type EvictionRule = 'lease_expired' | 'confirmed';

export interface Eviction {
  rule: EvictionRule;
  /** The row as the eviction found it. */
  before: IdempotencyKeyRow;
  /** The stored response as it was (JSON text), which `before` leaves out: for an audit record. */
  storedResponse: string | null;
}

export interface EvictRequest<TTx, TAudit> {
  key: RecordKey;
  /** The `version` of the row the caller looked at: a row that changed since is not evicted. */
  version: string;
  /**
   * Evict a key that is not stuck too: a live lease (its request may still be running, and a retry could run
   * beside it) or a completed key (the next retry runs the procedure again instead of replaying).
   */
  confirmed: boolean;
  /**
   * Runs in the eviction's transaction, after the delete: an audit row written here commits with it or not at
   * all, and a failure rolls the delete back. Required, so that an eviction without a record is a choice.
   */
  audit: (tx: TTx, eviction: Eviction) => Promise<TAudit>;
}

export type EvictResult<TAudit> =
  | { evicted: true; rule: EvictionRule; before: IdempotencyKeyRow; audit: TAudit }
  /**
   * `gone`: no such row. `changed`: the row's version is not the one given. `unconfirmed`: the key is live or
   * completed and `confirmed` was false. Nothing was deleted and `audit` did not run.
   */
  | { evicted: false; reason: 'gone' | 'changed' | 'unconfirmed'; row: IdempotencyKeyRow | null };

export interface DeleteExpiredOptions<TTx> {
  /** Rows per batch (one short transaction each). Default 10 000. */
  batchSize?: number;
  maxBatches?: number;
  /**
   * Runs in each batch's transaction with the number of rows it deleted (0 included): a count written here
   * commits together with the delete it counts. Without it, each batch is a single statement.
   */
  onBatch?: (tx: TTx, deleted: number) => Promise<void>;
  /** Bound on each batch's transaction. Default 60 s. */
  batchTimeoutMs?: number;
}

export interface IdempotencyKeyOperations<TTx> {
  /** The table these operations work on, as given (e.g. to label a metric). */
  readonly table: string;
  findKey(key: RecordKey): Promise<IdempotencyKeyRow | null>;
  findKeys(filter?: KeyFilter, options?: FindKeysOptions): Promise<IdempotencyKeyRow[]>;
  /** One pass over the `processing` rows. */
  countProcessing(): Promise<KeyCounts>;
  /** Deletes one key under its row lock, if it is still at `version` and the rule allows it. */
  evict<TAudit>(request: EvictRequest<TTx, TAudit>): Promise<EvictResult<TAudit>>;
  /** Deletes expired keys (never one whose lease is live) in batches until a batch comes back short. */
  deleteExpired(options?: DeleteExpiredOptions<TTx>): Promise<CleanupResult>;
}

export interface KeyOperationsOptions {
  /** Default `idempotency_keys`: the store's table. */
  table?: string;
}

interface KeyRowSql {
  scope: string;
  procedure: string;
  key: string;
  fingerprint: string;
  state: string;
  http_status: number | null;
  response_bytes: number | null;
  lease_owner: string | null;
  locked_until: Date | null;
  created_at: Date;
  expires_at: Date;
  replay_count: number;
  lease_live: boolean;
  expired: boolean;
  version: string;
}

const MAX_LIMIT = 500;

/**
 * `logKeyHash(scope, key)` in SQL, used only to find a key by its hash (every row's `keyHash` is computed by
 * `logKeyHash` itself). to_json escapes text as RFC 8785 does for a JSON string, so the canonical JSON of
 * {path: "key", input: [scope, key]} is this text; a test checks it against `logKeyHash` for keys with quotes,
 * backslashes, control characters and non-ASCII text (and it was checked once for every BMP code point).
 */
const KEY_HASH_SQL = `left(encode(sha256(convert_to(
  '{"input":[' || to_json(k.scope)::text || ',' || to_json(k.key)::text || '],"path":"key"}', 'UTF8')), 'hex'),
  ${LOG_KEY_HASH_LENGTH})`;

const VERSION_SQL = `left(md5(k.state || '|' || coalesce(k.lease_owner::text, '') || '|' || k.created_at::text
  || '|' || k.fingerprint), 16)`;

const LEASE_LIVE_SQL = `(k.state = 'processing' and coalesce(k.locked_until > now(), false))`;

const COLUMNS_SQL = `
  k.scope, k.procedure, k.key, k.fingerprint, k.state, k.http_status, octet_length(k.response) as response_bytes,
  k.lease_owner::text as lease_owner, k.locked_until, k.created_at, k.expires_at, k.replay_count,
  ${LEASE_LIVE_SQL} as lease_live, k.expires_at <= now() as expired, ${VERSION_SQL} as version`;

function toRow(row: KeyRowSql): IdempotencyKeyRow {
  const state: RecordState = row.state === 'completed' ? 'completed' : 'processing';
  return {
    scope: row.scope,
    procedure: row.procedure,
    key: row.key,
    fingerprint: row.fingerprint,
    state,
    status: state === 'completed' ? 'completed' : row.lease_live ? 'in_flight' : 'stuck',
    httpStatus: row.http_status,
    responseBytes: row.response_bytes,
    leaseOwner: row.lease_owner,
    lockedUntil: row.locked_until,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    expired: row.expired,
    replayCount: row.replay_count,
    keyHash: logKeyHash(row.scope, row.key),
    version: row.version,
  };
}

/** The filter as SQL over alias `k`, with its parameters from $1. */
function whereOf(filter: KeyFilter | undefined): { where: string; params: unknown[] } {
  if (!filter) return { where: 'true', params: [] };
  if ('key' in filter) return { where: 'k.key = $1', params: [filter.key] };
  if ('keyPrefix' in filter)
    return { where: `k.key like $1 escape '\\'`, params: [`${escapeLike(filter.keyPrefix)}%`] };
  if ('keyHash' in filter) return { where: `${KEY_HASH_SQL} = $1`, params: [filter.keyHash.toLowerCase()] };
  if ('status' in filter)
    return {
      where: `k.state = 'processing' and ${filter.status === 'in_flight' ? '' : 'not '}${LEASE_LIVE_SQL}`,
      params: [],
    };
  const scopes = typeof filter.scope === 'string' ? [filter.scope] : [...filter.scope];
  return filter.procedure === undefined
    ? { where: 'k.scope = any($1::text[])', params: [scopes] }
    : { where: 'k.scope = any($1::text[]) and k.procedure = $2', params: [scopes, filter.procedure] };
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (char) => `\\${char}`);
}

export function createIdempotencyKeyOperations<TClient extends PrismaClientLike>(
  db: TClient,
  options: KeyOperationsOptions = {},
): IdempotencyKeyOperations<PrismaTransactionLike<TClient>> {
  const tableName = options.table ?? DEFAULT_IDEMPOTENCY_TABLE;
  const table = quoteTable(tableName);
  const deleteBatch = expiredBatchDelete(tableName);
  const byKey = 'k.scope = $1 and k.procedure = $2 and k.key = $3';

  async function findKeys(filter?: KeyFilter, { limit = 50, order = 'newest' }: FindKeysOptions = {}) {
    if (!Number.isFinite(limit) || limit < 1) throw new RangeError(`limit must be at least 1, got ${limit}`);
    const { where, params } = whereOf(filter);
    const orderBy = order === 'newest' ? 'k.created_at desc' : 'k.expires_at desc';
    const rows = await db.$queryRawUnsafe<KeyRowSql[]>(
      `select ${COLUMNS_SQL} from ${table} k where ${where}
       order by ${orderBy} limit ${Math.min(MAX_LIMIT, Math.trunc(limit))}`,
      ...params,
    );
    return rows.map(toRow);
  }

  return {
    table: tableName,

    async findKey(key) {
      const rows = await db.$queryRawUnsafe<KeyRowSql[]>(
        `select ${COLUMNS_SQL} from ${table} k where ${byKey}`,
        key.scope,
        key.procedure,
        key.key,
      );
      return rows[0] ? toRow(rows[0]) : null;
    },

    findKeys,

    async countProcessing() {
      // The `(state, scope)` index serves it: it reads the processing rows only, of every scope.
      const rows = await db.$queryRawUnsafe<Array<{ in_flight: number; stuck: number }>>(
        `select count(*) filter (where ${LEASE_LIVE_SQL})::int as in_flight,
                count(*) filter (where not ${LEASE_LIVE_SQL})::int as stuck
         from ${table} k where k.state = 'processing'`,
      );
      return { inFlight: rows[0]?.in_flight ?? 0, stuck: rows[0]?.stuck ?? 0 };
    },

    evict<TAudit>({ key, version, confirmed, audit }: EvictRequest<PrismaTransactionLike<TClient>, TAudit>) {
      return db.$transaction(async (tx): Promise<EvictResult<TAudit>> => {
        const sql: SqlExecutor = tx;
        const rows = await sql.$queryRawUnsafe<Array<KeyRowSql & { response: string | null }>>(
          `select ${COLUMNS_SQL}, k.response from ${table} k where ${byKey} for update`,
          key.scope,
          key.procedure,
          key.key,
        );
        const found = rows[0];
        if (!found) return { evicted: false, reason: 'gone', row: null };
        const before = toRow(found);
        if (before.version !== version) return { evicted: false, reason: 'changed', row: before };
        const stuck = before.status === 'stuck';
        if (!stuck && !confirmed) return { evicted: false, reason: 'unconfirmed', row: before };
        const rule: EvictionRule = stuck ? 'lease_expired' : 'confirmed';
        await sql.$executeRawUnsafe(
          `delete from ${table} k where ${byKey}`,
          key.scope,
          key.procedure,
          key.key,
        );
        // Delivered at COMMIT, to every process listening (forgetEvictedKeys): their replay caches drop the key.
        await sql.$executeRawUnsafe(
          'select pg_notify($1, $2)',
          EVICTED_KEYS_CHANNEL,
          evictionNotice({ scope: key.scope, procedure: key.procedure, key: key.key }),
        );
        const eviction = { rule, before, storedResponse: found.response };
        return { evicted: true, rule, before, audit: await audit(tx, eviction) };
      });
    },

    deleteExpired({ batchSize = 10_000, maxBatches, onBatch, batchTimeoutMs = 60_000 } = {}) {
      const deleteExpiredBatch = (size: number) =>
        onBatch
          ? db.$transaction(
              async (tx) => {
                const deleted = await deleteBatch(tx, size);
                await onBatch(tx, deleted);
                return deleted;
              },
              { timeout: batchTimeoutMs },
            )
          : deleteBatch(db, size);
      // maxBatches undefined: cleanupExpiredKeys's default (no bound).
      return cleanupExpiredKeys({ deleteExpiredBatch }, { batchSize, maxBatches });
    },
  };
}
