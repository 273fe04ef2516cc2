/**
 * A key-table row as a driver returns it, and the record it is: what the SQL stores (MariaDB, SQLite) read back
 * in the same shape. Drivers differ in the small things only — a boolean may come back as 0/1 or a bigint, a
 * time as a Date or as ISO text (SQLite), a count as a bigint — and all of them are read here.
 */
import { type IdempotencyRecord, type RecordKey, RecordState, type StoredResponse } from '../core/record.ts';

export type SqlBoolean = boolean | number | bigint | null;

export interface KeyRow {
  fingerprint: string;
  state: string;
  /** The stored response's JSON text. */
  response: string | null;
  lease_owner: string | null;
  lease_active: SqlBoolean;
  created_at: Date | string;
  expires_at: Date | string;
  replay_count: number | bigint;
}

/** True for SQL's true, 1 or 1n. */
export const isTrue = (value: SqlBoolean): boolean => value === true || Number(value ?? 0) === 1;

const toDate = (value: Date | string): Date => (value instanceof Date ? value : new Date(value));

/** The record of `key` that `row` holds. */
export function recordOfRow(key: RecordKey, row: KeyRow): IdempotencyRecord {
  return {
    scope: key.scope,
    procedure: key.procedure,
    key: key.key,
    fingerprint: row.fingerprint,
    state: row.state === RecordState.completed ? RecordState.completed : RecordState.processing,
    response: row.response === null ? null : (JSON.parse(row.response) as StoredResponse),
    leaseOwner: row.lease_owner,
    leaseActive: isTrue(row.lease_active),
    createdAt: toDate(row.created_at),
    expiresAt: toDate(row.expires_at),
    replayCount: Number(row.replay_count),
  };
}
