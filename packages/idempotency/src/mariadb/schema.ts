/**
 * The MariaDB key table, defined once: the DDL and the Prisma model (provider "mysql") are both generated from
 * the column and index lists below. A test runs the DDL on a real MariaDB and the store's own tests use that
 * table; another checks the Prisma model of the test client against `prismaModel`.
 *
 * Why these types:
 * - scope, procedure, key are VARBINARY: compared byte for byte. A VARCHAR would take the table's collation —
 *   MariaDB's default utf8mb4_general_ci says 'ABC' = 'abc' and every PAD SPACE collation says 'a' = 'a ', so
 *   two different keys would share one row. A Prisma model cannot name a collation; VARBINARY needs none.
 * - times are DATETIME(6) holding UTC, written only from UTC_TIMESTAMP(6): independent of the session's
 *   time_zone (TIMESTAMP converts through it) and not limited to 2038. No column default: a default would be
 *   the session's local time.
 * - response is MEDIUMTEXT (16 MiB): TEXT stops at 64 KiB.
 */
import type { DialectColumns, KeyTableIndex, KeyTableSchema } from '../stores/key-table.ts';
import { keyTableSchema } from '../stores/key-table.ts';
import { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
import { bareMariadbTableName, MARIADB_KEY_COLUMN_BYTES, quoteMariadbTable } from './sql.ts';

const bytes = (length: number) =>
  ({ sqlType: `VARBINARY(${length})`, prismaType: 'Bytes', native: `@db.VarBinary(${length})` }) as const;
const DATETIME = { sqlType: 'DATETIME(6)', prismaType: 'DateTime', native: '@db.DateTime(6)' } as const;

const COLUMNS: DialectColumns = {
  scope: {
    ...bytes(MARIADB_KEY_COLUMN_BYTES.scope),
    doc: 'UTF-8 bytes, compared exactly (no collation: case and trailing spaces count).',
  },
  procedure: bytes(MARIADB_KEY_COLUMN_BYTES.procedure),
  key: bytes(MARIADB_KEY_COLUMN_BYTES.key),
  fingerprint: { sqlType: 'CHAR(64)', prismaType: 'String', native: '@db.Char(64)' },
  state: { sqlType: 'VARCHAR(16)', prismaType: 'String', native: '@db.VarChar(16)' },
  response: { sqlType: 'MEDIUMTEXT', prismaType: 'String', native: '@db.MediumText' },
  http_status: { sqlType: 'INT', prismaType: 'Int' },
  lease_owner: { sqlType: 'CHAR(36)', prismaType: 'String', native: '@db.Char(36)' },
  locked_until: { ...DATETIME, doc: 'UTC, like every time in this table.' },
  created_at: DATETIME,
  expires_at: DATETIME,
  replay_count: { sqlType: 'INT', prismaType: 'Int' },
};

const INDEXES: readonly KeyTableIndex[] = [
  { suffix: 'expires_at_idx', columns: ['expires_at'], doc: ['The cleanup walks expired keys by expiry.'] },
  {
    suffix: 'in_flight_idx',
    // Scope first, unlike Postgres's (state, scope): that order keeps a Postgres prepared statement's cached
    // generic plan from reading a key's row through this index; here the planner takes the primary key whenever
    // all of its columns are given (MariaDB plans every execution), so the order does not matter for lookups.
    columns: ['scope', 'state'],
    doc: ["The claim's per-principal in-flight count reads only the principal's keys that are processing."],
  },
];

export type MariadbIdempotencyKeysSchema = KeyTableSchema;

/** The MariaDB key table's definition for `table` (default `idempotency_keys`). */
export function mariadbIdempotencyKeysSchema(
  table: string = DEFAULT_IDEMPOTENCY_TABLE,
): MariadbIdempotencyKeysSchema {
  return keyTableSchema({
    table,
    quoted: quoteMariadbTable(table),
    bare: bareMariadbTableName(table),
    quote: (name) => `\`${name}\``,
    listSeparator: ', ',
    columns: COLUMNS,
    indexes: INDEXES,
    inlineIndexes: { tableOptions: ' ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin' },
    prismaComment: [
      'One row per (principal, procedure, Idempotency-Key) on MariaDB: the claim, then the stored response every',
      'duplicate gets back. The primary key is the whole contract: the claim is one INSERT IGNORE on it.',
      'Written only through @idem/idempotency/mariadb.',
    ],
  });
}
