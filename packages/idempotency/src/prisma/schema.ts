/**
 * The key table, defined once: the SQL (DDL) and the Prisma model are both generated from the column and index
 * lists below. The package README embeds their output for the default table and a test checks the README, this
 * repo's `prisma/schema.prisma` and its migrations against them, so the documented table is the one in use.
 */
import { DEFAULT_IDEMPOTENCY_TABLE } from '../stores/table-name.ts';
import { bareTableName, quoteTable } from './sql.ts';

interface Column {
  name: string;
  sqlType: string;
  notNull: boolean;
  sqlDefault?: string;
  prismaField: string;
  prismaType: string;
  prismaAttributes: string[];
  /** The Prisma model's doc comment for the field, if any. */
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
    sqlType: 'VARCHAR(255)',
    notNull: true,
    prismaField: 'key',
    prismaType: 'String',
    prismaAttributes: ['@db.VarChar(255)'],
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
    sqlType: 'UUID',
    notNull: false,
    prismaField: 'leaseOwner',
    prismaType: 'String?',
    prismaAttributes: ['@map("lease_owner")', '@db.Uuid'],
    doc: 'External mode: the lease. Completion and release must present the owner token (fencing).',
  },
  {
    name: 'locked_until',
    sqlType: 'TIMESTAMPTZ(6)',
    notNull: false,
    prismaField: 'lockedUntil',
    prismaType: 'DateTime?',
    prismaAttributes: ['@map("locked_until")', '@db.Timestamptz(6)'],
  },
  {
    name: 'created_at',
    sqlType: 'TIMESTAMPTZ(6)',
    notNull: true,
    sqlDefault: 'CURRENT_TIMESTAMP',
    prismaField: 'createdAt',
    prismaType: 'DateTime',
    prismaAttributes: ['@default(now())', '@map("created_at")', '@db.Timestamptz(6)'],
  },
  {
    name: 'expires_at',
    sqlType: 'TIMESTAMPTZ(6)',
    notNull: true,
    prismaField: 'expiresAt',
    prismaType: 'DateTime',
    prismaAttributes: ['@map("expires_at")', '@db.Timestamptz(6)'],
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

interface Index {
  /** Appended to the table's name: `<table>_<suffix>`. */
  suffix: string;
  columns: readonly (typeof COLUMNS)[number]['name'][];
  /** What it serves (the Prisma model's doc comment, one entry per line). */
  doc?: string[];
  /** The Prisma model names it explicitly (`map:`) instead of Prisma's default `<table>_<columns>_idx`. */
  prismaMap: boolean;
}

const PRIMARY_KEY = ['scope', 'procedure', 'key'] as const;

const INDEXES: readonly Index[] = [
  { suffix: 'expires_at_idx', columns: ['expires_at'], prismaMap: false },
  {
    suffix: 'in_flight_idx',
    columns: ['state', 'scope'],
    doc: [
      "The claim's per-principal in-flight count reads only the principal's keys that are processing:",
      'without it, each claim walks every key of the principal (1.5 s per claim at 100 000 keys). State',
      "first, so that it never serves a lookup by the primary key's (scope, …) instead of the primary key.",
    ],
    prismaMap: true,
  },
];

export interface IdempotencyKeysSchema {
  /** The table as given (`idempotency_keys`, or `schema.table`). */
  table: string;
  /**
   * `CREATE TABLE IF NOT EXISTS` and its `CREATE INDEX IF NOT EXISTS` statements, for a migration you write
   * yourself: run again, they change nothing (nor an existing table or index of the same name).
   */
  ddl: string;
  /** The statements of `ddl` one by one (Postgres runs one prepared statement at a time). */
  statements: string[];
  /** The model to paste into `schema.prisma` (then `prisma migrate dev`). */
  prismaModel: string;
  /** Every index the store's statements rely on, besides the primary key (scope, procedure, key). */
  indexes: Array<{ name: string; columns: string[] }>;
}

/** The key table's definition for `table` (default `idempotency_keys`). */
export function idempotencyKeysSchema(table: string = DEFAULT_IDEMPOTENCY_TABLE): IdempotencyKeysSchema {
  const quoted = quoteTable(table);
  const bare = bareTableName(table);
  const quote = (name: string) => `"${name}"`;
  const columnList = (names: readonly string[]) => names.map(quote).join(',');
  const indexes = INDEXES.map((index) => ({ name: `${bare}_${index.suffix}`, columns: [...index.columns] }));

  const columnLines = COLUMNS.map(
    (column) =>
      `    ${quote(column.name)} ${column.sqlType}${column.notNull ? ' NOT NULL' : ''}` +
      `${column.sqlDefault ? ` DEFAULT ${column.sqlDefault}` : ''},`,
  );
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${quoted} (\n${columnLines.join('\n')}\n\n` +
      `    CONSTRAINT ${quote(`${bare}_pkey`)} PRIMARY KEY (${columnList(PRIMARY_KEY)})\n);`,
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
  const bare = bareTableName(table);
  const schema = table.includes('.') ? table.split('.')[0] : null;
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
    ...INDEXES.flatMap((index) => {
      const columns = index.columns.map(fieldName).join(', ');
      const line = `  @@index([${columns}]${index.prismaMap ? `, map: "${bare}_${index.suffix}"` : ''})`;
      return [...(index.doc ?? []).map((doc) => `  /// ${doc}`), line];
    }),
    `  @@map("${bare}")`,
    ...(schema ? [`  @@schema("${schema}")`] : []),
  ];
  return [
    '/// One row per (principal, procedure, Idempotency-Key): the claim, then the stored response every duplicate',
    '/// gets back. The primary key is the whole contract: the claim is one INSERT … ON CONFLICT on it.',
    '/// Written only through @idem/idempotency.',
    'model IdempotencyKey {',
    ...fields,
    '',
    ...attributes,
    '}',
    '',
  ].join('\n');
}
