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
import { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
import { bareMariadbTableName, MARIADB_KEY_COLUMN_BYTES, quoteMariadbTable } from './sql.ts';

interface Column {
  name: string;
  sqlType: string;
  notNull: boolean;
  sqlDefault?: string;
  prismaField: string;
  prismaType: string;
  prismaAttributes: string[];
  doc?: string;
}

const COLUMNS: readonly Column[] = [
  {
    name: 'scope',
    sqlType: `VARBINARY(${MARIADB_KEY_COLUMN_BYTES.scope})`,
    notNull: true,
    prismaField: 'scope',
    prismaType: 'Bytes',
    prismaAttributes: [`@db.VarBinary(${MARIADB_KEY_COLUMN_BYTES.scope})`],
    doc: 'UTF-8 bytes, compared exactly (no collation: case and trailing spaces count).',
  },
  {
    name: 'procedure',
    sqlType: `VARBINARY(${MARIADB_KEY_COLUMN_BYTES.procedure})`,
    notNull: true,
    prismaField: 'procedure',
    prismaType: 'Bytes',
    prismaAttributes: [`@db.VarBinary(${MARIADB_KEY_COLUMN_BYTES.procedure})`],
  },
  {
    name: 'key',
    sqlType: `VARBINARY(${MARIADB_KEY_COLUMN_BYTES.key})`,
    notNull: true,
    prismaField: 'key',
    prismaType: 'Bytes',
    prismaAttributes: [`@db.VarBinary(${MARIADB_KEY_COLUMN_BYTES.key})`],
  },
  {
    name: 'fingerprint',
    sqlType: 'CHAR(64)',
    notNull: true,
    prismaField: 'fingerprint',
    prismaType: 'String',
    prismaAttributes: ['@db.Char(64)'],
    doc: 'SHA-256 of the canonical JSON (RFC 8785) of procedure path + input.',
  },
  {
    name: 'state',
    sqlType: 'VARCHAR(16)',
    notNull: true,
    prismaField: 'state',
    prismaType: 'String',
    prismaAttributes: ['@db.VarChar(16)'],
    doc: 'processing | completed',
  },
  {
    name: 'response',
    sqlType: 'MEDIUMTEXT',
    notNull: false,
    prismaField: 'response',
    prismaType: 'String?',
    prismaAttributes: ['@db.MediumText'],
    doc: 'The stored response (JSON text: output serialized by the tRPC transformer, or the error shape).',
  },
  {
    name: 'http_status',
    sqlType: 'INT',
    notNull: false,
    prismaField: 'httpStatus',
    prismaType: 'Int?',
    prismaAttributes: ['@map("http_status")'],
  },
  {
    name: 'lease_owner',
    sqlType: 'CHAR(36)',
    notNull: false,
    prismaField: 'leaseOwner',
    prismaType: 'String?',
    prismaAttributes: ['@map("lease_owner")', '@db.Char(36)'],
    doc: 'External mode: the lease. Completion and release must present the owner token (fencing).',
  },
  {
    name: 'locked_until',
    sqlType: 'DATETIME(6)',
    notNull: false,
    prismaField: 'lockedUntil',
    prismaType: 'DateTime?',
    prismaAttributes: ['@map("locked_until")', '@db.DateTime(6)'],
    doc: 'UTC, like every time in this table.',
  },
  {
    name: 'created_at',
    sqlType: 'DATETIME(6)',
    notNull: true,
    prismaField: 'createdAt',
    prismaType: 'DateTime',
    prismaAttributes: ['@map("created_at")', '@db.DateTime(6)'],
  },
  {
    name: 'expires_at',
    sqlType: 'DATETIME(6)',
    notNull: true,
    prismaField: 'expiresAt',
    prismaType: 'DateTime',
    prismaAttributes: ['@map("expires_at")', '@db.DateTime(6)'],
  },
  {
    name: 'replay_count',
    sqlType: 'INT',
    notNull: true,
    sqlDefault: '0',
    prismaField: 'replayCount',
    prismaType: 'Int',
    prismaAttributes: ['@default(0)', '@map("replay_count")'],
  },
];

const PRIMARY_KEY = ['scope', 'procedure', 'key'] as const;

interface Index {
  suffix: string;
  columns: readonly (typeof COLUMNS)[number]['name'][];
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
  const columnLines = COLUMNS.map(
    (column) =>
      `    ${quote(column.name)} ${column.sqlType}${column.notNull ? ' NOT NULL' : ''}` +
      `${column.sqlDefault ? ` DEFAULT ${column.sqlDefault}` : ''},`,
  );
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${quoted} (\n${columnLines.join('\n')}\n\n` +
      `    PRIMARY KEY (${columnList(PRIMARY_KEY)}),\n` +
      indexes.map((index) => `    INDEX ${quote(index.name)} (${columnList(index.columns)})`).join(',\n') +
      '\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;',
  ];
  return { table, ddl: `${statements.join('\n\n')}\n`, statements, prismaModel: prismaModel(table), indexes };
}

function prismaModel(table: string): string {
  const bare = bareMariadbTableName(table);
  const fieldWidth = Math.max(...COLUMNS.map((column) => column.prismaField.length));
  const typeWidth = Math.max(...COLUMNS.map((column) => column.prismaType.length));
  const fields = COLUMNS.flatMap((column) => {
    const line = [
      column.prismaField.padEnd(fieldWidth),
      column.prismaAttributes.length ? column.prismaType.padEnd(typeWidth) : column.prismaType,
      ...column.prismaAttributes,
    ].join(' ');
    return column.doc ? [`  /// ${column.doc}`, `  ${line}`] : [`  ${line}`];
  });
  const fieldName = (name: string) => COLUMNS.find((column) => column.name === name)?.prismaField ?? name;
  const attributes = [
    `  @@id([${PRIMARY_KEY.join(', ')}])`,
    ...INDEXES.flatMap((index) => [
      ...(index.doc ?? []).map((doc) => `  /// ${doc}`),
      `  @@index([${index.columns.map(fieldName).join(', ')}], map: "${bare}_${index.suffix}")`,
    ]),
    `  @@map("${bare}")`,
  ];
  return [
    '/// One row per (principal, procedure, Idempotency-Key) on MariaDB: the claim, then the stored response every',
    '/// duplicate gets back. The primary key is the whole contract: the claim is one INSERT IGNORE on it.',
    '/// Written only through @idem/idempotency/mariadb.',
    'model IdempotencyKey {',
    ...fields,
    '',
    ...attributes,
    '}',
    '',
  ].join('\n');
}
