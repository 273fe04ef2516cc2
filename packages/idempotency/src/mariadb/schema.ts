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
import {
  columnDefinitions,
  type DialectColumns,
  KEY_PRIMARY_KEY,
  type KeyColumnName,
  prismaModelText,
} from '../stores/key-table.ts';
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

interface Index {
  suffix: string;
  columns: readonly KeyColumnName[];
  doc?: string[];
}

const INDEXES: readonly Index[] = [
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

export interface MariadbIdempotencyKeysSchema {
  /** The table as given (`idempotency_keys`, or `database.table`). */
  table: string;
  /**
   * `CREATE TABLE IF NOT EXISTS` with its indexes inline, for a migration you write yourself: run again, it
   * changes nothing (nor an existing table of the same name).
   */
  ddl: string;
  /** The statements of `ddl` one by one (a prepared statement holds one). */
  statements: string[];
  /** The model to paste into a `schema.prisma` whose datasource provider is "mysql" (then `prisma migrate dev`). */
  prismaModel: string;
  /** Every index the store's statements rely on, besides the primary key (scope, procedure, key). */
  indexes: Array<{ name: string; columns: string[] }>;
}

/** The MariaDB key table's definition for `table` (default `idempotency_keys`). */
export function mariadbIdempotencyKeysSchema(
  table: string = DEFAULT_IDEMPOTENCY_TABLE,
): MariadbIdempotencyKeysSchema {
  const quoted = quoteMariadbTable(table);
  const bare = bareMariadbTableName(table);
  const quote = (name: string) => `\`${name}\``;
  const columnList = (names: readonly string[]) => names.map(quote).join(', ');
  const indexes = INDEXES.map((index) => ({ name: `${bare}_${index.suffix}`, columns: [...index.columns] }));
  const columnLines = columnDefinitions(COLUMNS, quote);
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${quoted} (\n${columnLines.join('\n')}\n\n` +
      `    PRIMARY KEY (${columnList(KEY_PRIMARY_KEY)}),\n` +
      indexes.map((index) => `    INDEX ${quote(index.name)} (${columnList(index.columns)})`).join(',\n') +
      '\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;',
  ];
  return { table, ddl: `${statements.join('\n\n')}\n`, statements, prismaModel: prismaModel(table), indexes };
}

function prismaModel(table: string): string {
  const bare = bareMariadbTableName(table);
  return prismaModelText({
    comment: [
      'One row per (principal, procedure, Idempotency-Key) on MariaDB: the claim, then the stored response every',
      'duplicate gets back. The primary key is the whole contract: the claim is one INSERT IGNORE on it.',
      'Written only through @idem/idempotency/mariadb.',
    ],
    columns: COLUMNS,
    indexes: INDEXES.map((index) => ({ ...index, map: `${bare}_${index.suffix}` })),
    table: bare,
  });
}
