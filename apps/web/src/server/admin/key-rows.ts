/**
 * Reading `idempotency_keys` for the admin tools. Raw SQL so that the lease state is judged by the database's
 * clock — the same now() the library claims and takes over with — and so the log's key hash can be computed
 * next to the row. Never returns the stored response body, only its size.
 */
import type { Database } from '@idem/db';
import { encodeKeyRef } from '~/lib/key-ref';

/** processing + live lease | processing + lease ended (its owner is gone) | completed */
export type KeyStatus = 'in_flight' | 'stuck' | 'completed';

export interface KeyView {
  ref: string;
  scope: string;
  procedure: string;
  key: string;
  /** The `key_hash` of the JSON log lines: SHA-256 of the canonical JSON {path:"key", input:[scope, key]}, 16 hex. */
  keyHash: string;
  fingerprint: string;
  state: 'processing' | 'completed';
  status: KeyStatus;
  httpStatus: number | null;
  responseBytes: number | null;
  leaseOwner: string | null;
  lockedUntil: Date | null;
  createdAt: Date;
  expiresAt: Date;
  /** Past its retention: the next request with this key runs as new (and the cleanup will delete it). */
  expired: boolean;
  replayCount: number;
  /** Changes whenever the row is claimed, taken over or completed: eviction refuses a row that moved on. */
  version: string;
}

/**
 * The log's key hash in SQL. The canonical JSON (RFC 8785) of {path: "key", input: [scope, key]} is exactly this
 * text for the ASCII scopes and keys the app stores (to_json escapes `"` and `\` as JCS does); a test checks
 * it against the library's own hash.
 */
export const KEY_HASH_SQL = `left(encode(sha256(convert_to(
  '{"input":[' || to_json(k.scope)::text || ',' || to_json(k.key)::text || '],"path":"key"}', 'UTF8')), 'hex'), 16)`;

export const KEY_COLUMNS_SQL = `
  k.scope, k.procedure, k.key, k.fingerprint, k.state, k.http_status, octet_length(k.response) as response_bytes,
  k.lease_owner::text as lease_owner, k.locked_until, k.created_at, k.expires_at, k.replay_count,
  (k.state = 'processing' and k.locked_until > now()) as lease_live,
  k.expires_at <= now() as expired,
  ${KEY_HASH_SQL} as key_hash,
  left(md5(k.state || '|' || coalesce(k.lease_owner::text, '') || '|' || k.created_at::text || '|' || k.fingerprint), 16)
    as version`;

export interface KeyRowSql {
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
  key_hash: string;
  version: string;
}

export function toKeyView(row: KeyRowSql): KeyView {
  const state = row.state === 'completed' ? 'completed' : 'processing';
  return {
    ref: encodeKeyRef(row),
    scope: row.scope,
    procedure: row.procedure,
    key: row.key,
    keyHash: row.key_hash,
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
    version: row.version,
  };
}

/**
 * Rows matching `where` (SQL over alias k, parameters from $1), newest first. `latest-expiry` orders by
 * expires_at instead — the same order for keys with the same retention, and it walks the expires_at index
 * instead of sorting the whole table (the key browser's default list).
 */
export async function selectKeys(
  db: Database,
  where: string,
  params: unknown[],
  limit: number,
  order: 'newest' | 'latest-expiry' = 'newest',
): Promise<KeyView[]> {
  const orderBy = order === 'newest' ? 'k.created_at desc' : 'k.expires_at desc';
  const rows = await db.$queryRawUnsafe<KeyRowSql[]>(
    `select ${KEY_COLUMNS_SQL} from idempotency_keys k where ${where}
     order by ${orderBy} limit ${Math.max(1, Math.min(500, Math.trunc(limit)))}`,
    ...params,
  );
  return rows.map(toKeyView);
}

/** Keys still processing whose lease has ended (their owner died mid-request), newest first. */
export function listStuckKeys(db: Database, limit = 20): Promise<KeyView[]> {
  return selectKeys(db, `k.state = 'processing' and k.locked_until <= now()`, [], limit);
}
