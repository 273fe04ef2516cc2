/**
 * The key table, defined once: the SQL (DDL) and the Prisma model are both generated from the column and index
 * lists below. The package README embeds their output for the default table and a test checks the README, this
 * repo's `prisma/schema.prisma` and its migrations against them, so the documented table is the one in use.
 */
import {
  columnDefinitions,
  type DialectColumns,
  KEY_PRIMARY_KEY,
  type KeyColumnName,
  prismaModelText,
} from '../stores/key-table.ts';
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

interface Index {
  /** Appended to the table's name: `<table>_<suffix>`. */
  suffix: string;
  columns: readonly KeyColumnName[];
  /** What it serves (the Prisma model's doc comment, one entry per line). */
  doc?: string[];
  /** The Prisma model names it explicitly (`map:`) instead of Prisma's default `<table>_<columns>_idx`. */
  prismaMap: boolean;
}

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

  const columnLines = columnDefinitions(COLUMNS, quote);
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${quoted} (\n${columnLines.join('\n')}\n\n` +
      `    CONSTRAINT ${quote(`${bare}_pkey`)} PRIMARY KEY (${columnList(KEY_PRIMARY_KEY)})\n);`,
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
  return prismaModelText({
    comment: [
      'One row per (principal, procedure, Idempotency-Key): the claim, then the stored response every duplicate',
      'gets back. The primary key is the whole contract: the claim is one INSERT … ON CONFLICT on it.',
      'Written only through @idem/idempotency.',
    ],
    columns: COLUMNS,
    indexes: INDEXES.map((index) => ({
      ...index,
      ...(index.prismaMap ? { map: `${bare}_${index.suffix}` } : {}),
    })),
    table: bare,
    schema: table.includes('.') ? table.split('.')[0] : null,
  });
}
