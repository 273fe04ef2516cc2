/**
 * The SQLite key table, defined once: the DDL and the Prisma model (provider "sqlite") are both generated from
 * the lists below. Same columns and meaning as the Postgres table (`idempotencyKeysSchema()`), in SQLite's
 * types: times are ISO-8601 text in UTC with milliseconds (`2026-12-01T12:00:00.000+00:00`, the format Prisma's
 * SQLite adapter writes for a DateTime), produced by SQLite's own clock (`SQLITE_NOW`). One fixed-width format
 * means text order is time order, so `expires_at <= now` compares (and uses the index) as plain text.
 */
import type { DialectColumns, KeyTableIndex, KeyTableSchema } from '../stores/key-table.ts';
import { keyTableSchema } from '../stores/key-table.ts';
import { quoteSqliteTable } from './sql.ts';

const TEXT = { sqlType: 'TEXT', prismaType: 'String' } as const;
const DATETIME = { sqlType: 'DATETIME', prismaType: 'DateTime' } as const;

const COLUMNS: DialectColumns = {
  scope: TEXT,
  procedure: TEXT,
  key: TEXT,
  fingerprint: TEXT,
  state: TEXT,
  response: TEXT,
  http_status: { sqlType: 'INTEGER', prismaType: 'Int' },
  lease_owner: TEXT,
  locked_until: DATETIME,
  created_at: DATETIME,
  expires_at: DATETIME,
  replay_count: { sqlType: 'INTEGER', prismaType: 'Int' },
};

const INDEXES: readonly KeyTableIndex[] = [
  { suffix: 'expires_at_idx', columns: ['expires_at'] },
  {
    suffix: 'in_flight_idx',
    // Scope first, unlike Postgres's (state, scope): that order keeps a Postgres prepared statement's cached
    // generic plan from reading a key's row through this index; here the planner takes the primary key whenever
    // all of its columns are given (MariaDB plans every execution), so the order does not matter for lookups.
    columns: ['scope', 'state'],
    doc: ["The claim's per-principal in-flight count reads only the principal's keys that are processing."],
  },
];

export type SqliteIdempotencyKeysSchema = KeyTableSchema;

/** The SQLite key table's definition for `table` (default `idempotency_keys`). */
export function sqliteIdempotencyKeysSchema(table = 'idempotency_keys'): SqliteIdempotencyKeysSchema {
  return keyTableSchema({
    table,
    quoted: quoteSqliteTable(table),
    bare: table,
    quote: (name) => `"${name}"`,
    listSeparator: ', ',
    columns: COLUMNS,
    indexes: INDEXES,
    prismaComment: [
      'One row per (principal, procedure, Idempotency-Key): the claim, then the stored response every duplicate',
      'gets back. The primary key is the whole contract: the claim is one INSERT … ON CONFLICT on it.',
      'Written only through @idem/idempotency/sqlite (times are SQLite-clock ISO-8601 text).',
    ],
  });
}
