/**
 * The key table's columns, written once for every database: their names and order, their Prisma field names
 * (a field named otherwise than its column gets its `@map`), which may be null, their doc comments, the defaults
 * they share, and the primary key. Each dialect's schema (prisma/, mariadb/, sqlite/) gives each column its types
 * and what differs there, and renders the table with the helpers below.
 */

export const KEY_COLUMNS = [
  { name: 'scope', prismaField: 'scope', notNull: true },
  { name: 'procedure', prismaField: 'procedure', notNull: true },
  { name: 'key', prismaField: 'key', notNull: true },
  {
    name: 'fingerprint',
    prismaField: 'fingerprint',
    notNull: true,
    doc: 'SHA-256 of the canonical JSON (RFC 8785) of procedure path + input.',
  },
  { name: 'state', prismaField: 'state', notNull: true, doc: 'processing | completed' },
  {
    name: 'response',
    prismaField: 'response',
    notNull: false,
    doc: 'The stored response (JSON text: output serialized by the tRPC transformer, or the error shape).',
  },
  { name: 'http_status', prismaField: 'httpStatus', notNull: false },
  {
    name: 'lease_owner',
    prismaField: 'leaseOwner',
    notNull: false,
    doc: 'External mode: the lease. Completion and release must present the owner token (fencing).',
  },
  { name: 'locked_until', prismaField: 'lockedUntil', notNull: false },
  { name: 'created_at', prismaField: 'createdAt', notNull: true },
  { name: 'expires_at', prismaField: 'expiresAt', notNull: true },
  { name: 'replay_count', prismaField: 'replayCount', notNull: true, sqlDefault: '0', prismaDefault: '0' },
] as const satisfies ReadonlyArray<{
  name: string;
  prismaField: string;
  notNull: boolean;
  /** The Prisma model's doc comment for the field, in every dialect. */
  doc?: string;
  sqlDefault?: string;
  /** What `@default(…)` holds in the Prisma model. */
  prismaDefault?: string;
}>;

type KeyColumn = (typeof KEY_COLUMNS)[number];

export type KeyColumnName = (typeof KEY_COLUMNS)[number]['name'];

/** The claim's whole contract: one row per (principal, procedure, key). */
export const KEY_PRIMARY_KEY = ['scope', 'procedure', 'key'] as const;

/** What a dialect says of one column: its types, and what it adds to the column's definition above. */
export interface DialectColumn {
  sqlType: string;
  /** The Prisma scalar type, without `?` (added for a column that may be null). */
  prismaType: string;
  /** The Prisma native type attribute (`@db.…`), if any. */
  native?: string;
  sqlDefault?: string;
  prismaDefault?: string;
  /** A doc comment of this dialect's, in place of the column's own. */
  doc?: string;
}

/** A dialect's types for every column (the compiler checks that none is missing). */
export type DialectColumns = { readonly [TName in KeyColumnName]: DialectColumn };

/** A column's definition, with what its dialect adds to it. */
function columnOf(columns: DialectColumns, column: KeyColumn) {
  const own = column as { doc?: string; sqlDefault?: string; prismaDefault?: string };
  const dialect = columns[column.name];
  return {
    ...dialect,
    sqlDefault: dialect.sqlDefault ?? own.sqlDefault,
    doc: dialect.doc ?? own.doc,
    prismaAttributes: [
      ...[dialect.prismaDefault ?? own.prismaDefault].flatMap((value) =>
        value ? [`@default(${value})`] : [],
      ),
      ...(column.prismaField === column.name ? [] : [`@map("${column.name}")`]),
      ...(dialect.native ? [dialect.native] : []),
    ],
  };
}

/** The `CREATE TABLE` lines of the columns, in order, each ending with a comma. */
export function columnDefinitions(columns: DialectColumns, quote: (name: string) => string): string[] {
  return KEY_COLUMNS.map((column) => {
    const { sqlType, sqlDefault } = columnOf(columns, column);
    return `    ${quote(column.name)} ${sqlType}${column.notNull ? ' NOT NULL' : ''}${sqlDefault ? ` DEFAULT ${sqlDefault}` : ''},`;
  });
}

/** The Prisma model's field lines, aligned, each after its doc comment. */
export function prismaFields(columns: DialectColumns): string[] {
  const typeOf = ({ name, notNull }: KeyColumn) => `${columns[name].prismaType}${notNull ? '' : '?'}`;
  const fieldWidth = Math.max(...KEY_COLUMNS.map((column) => column.prismaField.length));
  const typeWidth = Math.max(...KEY_COLUMNS.map((column) => typeOf(column).length));
  return KEY_COLUMNS.flatMap((column) => {
    const { prismaAttributes, doc } = columnOf(columns, column);
    const line = [
      column.prismaField.padEnd(fieldWidth),
      prismaAttributes.length ? typeOf(column).padEnd(typeWidth) : typeOf(column),
      ...prismaAttributes,
    ].join(' ');
    return doc ? [`  /// ${doc}`, `  ${line}`] : [`  ${line}`];
  });
}

/** The Prisma field of a column. */
export function prismaFieldOf(name: KeyColumnName): string {
  return KEY_COLUMNS.find((column) => column.name === name)?.prismaField ?? name;
}

/** One `@@index` of the Prisma model: its columns, its doc comment lines, its explicit name (`map:`) if any. */
export interface PrismaIndex {
  columns: readonly KeyColumnName[];
  doc?: readonly string[];
  map?: string;
}

/** The Prisma model `IdempotencyKey`: `comment` above it, the fields, the primary key, the indexes, the table. */
function prismaModelText(model: {
  comment: readonly string[];
  columns: DialectColumns;
  indexes: readonly PrismaIndex[];
  /** The table's name (`@@map`), and its schema (`@@schema`) when it has one. */
  table: string;
  schema?: string | null;
}): string {
  const attributes = [
    `  @@id([${KEY_PRIMARY_KEY.join(', ')}])`,
    ...model.indexes.flatMap((index) => {
      const columns = index.columns.map(prismaFieldOf).join(', ');
      const line = `  @@index([${columns}]${index.map ? `, map: "${index.map}"` : ''})`;
      return [...(index.doc ?? []).map((doc) => `  /// ${doc}`), line];
    }),
    `  @@map("${model.table}")`,
    ...(model.schema ? [`  @@schema("${model.schema}")`] : []),
  ];
  return [
    ...model.comment.map((line) => `/// ${line}`),
    'model IdempotencyKey {',
    ...prismaFields(model.columns),
    '',
    ...attributes,
    '}',
    '',
  ].join('\n');
}

/** An index the store's statements rely on, besides the primary key: named `<table>_<suffix>`. */
export interface KeyTableIndex {
  suffix: string;
  columns: readonly KeyColumnName[];
  /** What it serves (the Prisma model's doc comment, one entry per line). */
  doc?: string[];
  /**
   * The Prisma model leaves the name to Prisma (`<table>_<columns>_idx`, the same name for a one-column index
   * named after its column) instead of naming it with `map:`.
   */
  prismaDefaultName?: boolean;
}

/** A dialect's key table: what `idempotencyKeysSchema()` and its MariaDB and SQLite twins return. */
export interface KeyTableSchema {
  /** The table as given (`idempotency_keys`, or qualified where the dialect has schemas or databases). */
  table: string;
  /**
   * `CREATE TABLE IF NOT EXISTS` and its indexes (`CREATE INDEX IF NOT EXISTS`, or inline on MariaDB), for a
   * migration you write yourself: run again, they change nothing (nor an existing table or index of the same name).
   */
  ddl: string;
  /** The statements of `ddl` one by one (a prepared statement holds one). */
  statements: string[];
  /** The model to paste into the dialect's `schema.prisma` (then `prisma migrate dev`). */
  prismaModel: string;
  /** Every index the store's statements rely on, besides the primary key (scope, procedure, key). */
  indexes: Array<{ name: string; columns: string[] }>;
}

/** How a dialect spells the key table's DDL. */
export interface KeyTableDialect {
  /** The table as given, quoted, and bare (what index names start with). */
  table: string;
  quoted: string;
  bare: string;
  quote: (name: string) => string;
  /** Between two columns of a key or an index. */
  listSeparator: string;
  columns: DialectColumns;
  indexes: readonly KeyTableIndex[];
  /** The primary key's constraint name (Postgres), or none. */
  primaryKeyName?: string;
  /** Indexes inside the CREATE TABLE (MariaDB), followed by these table options; else one statement each. */
  inlineIndexes?: { tableOptions: string };
  /** The Prisma model's doc comment, one entry per line. */
  prismaComment: readonly string[];
  /** The table's schema (`@@schema`), where the dialect has schemas and the table is qualified. */
  prismaSchema?: string | null;
}

/** The DDL, its statements and indexes of `dialect`, from the one column list. */
export function keyTableSchema(dialect: KeyTableDialect): KeyTableSchema {
  const { quote, quoted } = dialect;
  const columnList = (names: readonly string[]) => names.map(quote).join(dialect.listSeparator);
  const indexes = dialect.indexes.map((index) => ({
    name: `${dialect.bare}_${index.suffix}`,
    columns: [...index.columns],
  }));
  const constraint = dialect.primaryKeyName ? `CONSTRAINT ${quote(dialect.primaryKeyName)} ` : '';
  const createTable =
    `CREATE TABLE IF NOT EXISTS ${quoted} (\n${columnDefinitions(dialect.columns, quote).join('\n')}\n\n` +
    `    ${constraint}PRIMARY KEY (${columnList(KEY_PRIMARY_KEY)})`;
  const statements = dialect.inlineIndexes
    ? [
        `${createTable},\n` +
          indexes
            .map((index) => `    INDEX ${quote(index.name)} (${columnList(index.columns)})`)
            .join(',\n') +
          `\n)${dialect.inlineIndexes.tableOptions};`,
      ]
    : [
        `${createTable}\n);`,
        ...indexes.map(
          (index) =>
            `CREATE INDEX IF NOT EXISTS ${quote(index.name)} ON ${quoted}(${columnList(index.columns)});`,
        ),
      ];
  return {
    table: dialect.table,
    ddl: `${statements.join('\n\n')}\n`,
    statements,
    prismaModel: prismaModelText({
      comment: dialect.prismaComment,
      columns: dialect.columns,
      indexes: dialect.indexes.map((index) => ({
        ...index,
        ...(index.prismaDefaultName ? {} : { map: `${dialect.bare}_${index.suffix}` }),
      })),
      table: dialect.bare,
      schema: dialect.prismaSchema,
    }),
    indexes,
  };
}
