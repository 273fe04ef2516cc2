/**
 * The SQLite key table, defined once: the DDL and the Prisma model (provider "sqlite") are both generated from
 * the lists below. Same columns and meaning as the Postgres table (`idempotencyKeysSchema()`), in SQLite's
 * types: times are ISO-8601 text in UTC with milliseconds (`2026-12-01T12:00:00.000+00:00`, the format Prisma's
 * SQLite adapter writes for a DateTime), produced by SQLite's own clock (`SQLITE_NOW`). One fixed-width format
 * means text order is time order, so `expires_at <= now` compares (and uses the index) as plain text.
 */
import { quoteSqliteTable } from './sql.ts';

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
    sqlType: 'TEXT',
    notNull: true,
    prismaField: 'scope',
    prismaType: 'String',
    prismaAttributes: [],
  },
  {
    name: 'procedure',
    sqlType: 'TEXT',
    notNull: true,
    prismaField: 'procedure',
    prismaType: 'String',
    prismaAttributes: [],
  },
  {
    name: 'key',
    sqlType: 'TEXT',
    notNull: true,
    prismaField: 'key',
    prismaType: 'String',
    prismaAttributes: [],
  },
  {
    name: 'fingerprint',
    sqlType: 'TEXT',
    notNull: true,
    prismaField: 'fingerprint',
    prismaType: 'String',
    prismaAttributes: [],
    doc: 'SHA-256 of the canonical JSON (RFC 8785) of procedure path + input.',
  },
  {
    name: 'state',
    sqlType: 'TEXT',
    notNull: true,
    prismaField: 'state',
    prismaType: 'String',
    prismaAttributes: [],
    doc: 'processing | completed',
  },
  {
    name: 'response',
    sqlType: 'TEXT',
    notNull: false,
    prismaField: 'response',
    prismaType: 'String?',
    prismaAttributes: [],
    doc: 'The stored response (JSON text: output serialized by the tRPC transformer, or the error shape).',
  },
  {
    name: 'http_status',
    sqlType: 'INTEGER',
    notNull: false,
    prismaField: 'httpStatus',
    prismaType: 'Int?',
    prismaAttributes: ['@map("http_status")'],
  },
  {
    name: 'lease_owner',
    sqlType: 'TEXT',
    notNull: false,
    prismaField: 'leaseOwner',
    prismaType: 'String?',
    prismaAttributes: ['@map("lease_owner")'],
    doc: 'External mode: the lease. Completion and release must present the owner token (fencing).',
  },
  {
    name: 'locked_until',
    sqlType: 'DATETIME',
    notNull: false,
    prismaField: 'lockedUntil',
    prismaType: 'DateTime?',
    prismaAttributes: ['@map("locked_until")'],
  },
  {
    name: 'created_at',
    sqlType: 'DATETIME',
    notNull: true,
    prismaField: 'createdAt',
    prismaType: 'DateTime',
    prismaAttributes: ['@map("created_at")'],
  },
  {
    name: 'expires_at',
    sqlType: 'DATETIME',
    notNull: true,
    prismaField: 'expiresAt',
    prismaType: 'DateTime',
    prismaAttributes: ['@map("expires_at")'],
  },
  {
    name: 'replay_count',
    sqlType: 'INTEGER',
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
  columns: readonly string[];
  doc?: string[];
}

const INDEXES: readonly Index[] = [
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

export interface SqliteIdempotencyKeysSchema {
  table: string;
  /**
   * `CREATE TABLE IF NOT EXISTS` and its `CREATE INDEX IF NOT EXISTS` statements, for a migration you write
   * yourself: run again, they change nothing (nor an existing table or index of the same name).
   */
  ddl: string;
  /** The statements of `ddl` one by one (a prepared statement runs one at a time). */
  statements: string[];
  /** The model to paste into a `schema.prisma` whose datasource is `provider = "sqlite"`. */
  prismaModel: string;
  /** Every index the store's statements rely on, besides the primary key (scope, procedure, key). */
  indexes: Array<{ name: string; columns: string[] }>;
}

/** The SQLite key table's definition for `table` (default `idempotency_keys`). */
export function sqliteIdempotencyKeysSchema(table = 'idempotency_keys'): SqliteIdempotencyKeysSchema {
  const quoted = quoteSqliteTable(table);
  const quote = (name: string) => `"${name}"`;
  const columnList = (names: readonly string[]) => names.map(quote).join(', ');
  const indexes = INDEXES.map((index) => ({ name: `${table}_${index.suffix}`, columns: [...index.columns] }));
  const columnLines = COLUMNS.map(
    (column) =>
      `    ${quote(column.name)} ${column.sqlType}${column.notNull ? ' NOT NULL' : ''}` +
      `${column.sqlDefault ? ` DEFAULT ${column.sqlDefault}` : ''},`,
  );
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${quoted} (\n${columnLines.join('\n')}\n\n` +
      `    PRIMARY KEY (${columnList(PRIMARY_KEY)})\n);`,
    ...indexes.map(
      (index) =>
        `CREATE INDEX IF NOT EXISTS ${quote(index.name)} ON ${quoted}(${columnList(index.columns)});`,
    ),
  ];
  return {
    table,
    ddl: `${statements.join('\n\n')}\n`,
    statements,
    prismaModel: prismaModel(table),
    indexes,
  };
}

function prismaModel(table: string): string {
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
      `  @@index([${index.columns.map(fieldName).join(', ')}], map: "${table}_${index.suffix}")`,
    ]),
    `  @@map("${table}")`,
  ];
  return [
    '/// One row per (principal, procedure, Idempotency-Key): the claim, then the stored response every duplicate',
    '/// gets back. The primary key is the whole contract: the claim is one INSERT … ON CONFLICT on it.',
    '/// Written only through @idem/idempotency/sqlite (times are SQLite-clock ISO-8601 text).',
    'model IdempotencyKey {',
    ...fields,
    '',
    ...attributes,
    '}',
    '',
  ].join('\n');
}
