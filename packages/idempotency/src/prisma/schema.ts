/**
 * The key table, defined once: the SQL (DDL) and the Prisma model are both generated from the column and index
 * lists below. The package README embeds their output for the default table and a test checks the README, this
 * repo's `prisma/schema.prisma` and its migrations against them, so the documented table is the one in use.
 */
import type { DialectColumns, KeyTableIndex, KeyTableSchema } from '../stores/key-table.ts';
import { keyTableSchema } from '../stores/key-table.ts';
import { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
import { bareTableName, quoteTable } from './sql.ts';

const TEXT = { sqlType: 'TEXT', prismaType: 'String' } as const;
const TIMESTAMP = {
  sqlType: 'TIMESTAMPTZ(6)',
  prismaType: 'DateTime',
  native: '@db.Timestamptz(6)',
} as const;

const COLUMNS: DialectColumns = {
  scope: TEXT,
  procedure: TEXT,
  key: { sqlType: 'VARCHAR(255)', prismaType: 'String', native: '@db.VarChar(255)' },
  fingerprint: { sqlType: 'CHAR(64)', prismaType: 'String', native: '@db.Char(64)' },
  state: TEXT,
  response: TEXT,
  http_status: { sqlType: 'INTEGER', prismaType: 'Int' },
  lease_owner: { sqlType: 'UUID', prismaType: 'String', native: '@db.Uuid' },
  locked_until: TIMESTAMP,
  created_at: { ...TIMESTAMP, sqlDefault: 'CURRENT_TIMESTAMP', prismaDefault: 'now()' },
  expires_at: TIMESTAMP,
  replay_count: { sqlType: 'INTEGER', prismaType: 'Int' },
};

const INDEXES: readonly KeyTableIndex[] = [
  { suffix: 'expires_at_idx', columns: ['expires_at'], prismaDefaultName: true },
  {
    suffix: 'in_flight_idx',
    columns: ['state', 'scope'],
    doc: [
      "The claim's per-principal in-flight count reads only the principal's keys that are processing:",
      'without it, each claim walks every key of the principal (1.5 s per claim at 100 000 keys). State',
      "first, so that it never serves a lookup by the primary key's (scope, …) instead of the primary key.",
    ],
  },
];

export type IdempotencyKeysSchema = KeyTableSchema;

/** The key table's definition for `table` (default `idempotency_keys`). */
export function idempotencyKeysSchema(table: string = DEFAULT_IDEMPOTENCY_TABLE): IdempotencyKeysSchema {
  const bare = bareTableName(table);
  return keyTableSchema({
    table,
    quoted: quoteTable(table),
    bare,
    quote: (name) => `"${name}"`,
    listSeparator: ',',
    columns: COLUMNS,
    indexes: INDEXES,
    primaryKeyName: `${bare}_pkey`,
    prismaComment: [
      'One row per (principal, procedure, Idempotency-Key): the claim, then the stored response every duplicate',
      'gets back. The primary key is the whole contract: the claim is one INSERT … ON CONFLICT on it.',
      'Written only through @idem/idempotency.',
    ],
    prismaSchema: table.includes('.') ? table.split('.')[0] : null,
  });
}
