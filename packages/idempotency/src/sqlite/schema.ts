/**
 * The SQLite key table, defined once: the DDL and the Prisma model (provider "sqlite") are both generated from
 * the lists below. Same columns and meaning as the Postgres table (`idempotencyKeysSchema()`), in SQLite's
 * types: times are ISO-8601 text in UTC with milliseconds (`2026-12-01T12:00:00.000+00:00`, the format Prisma's
 * SQLite adapter writes for a DateTime), produced by SQLite's own clock (`SQLITE_NOW`). One fixed-width format
 * means text order is time order, so `expires_at <= now` compares (and uses the index) as plain text.
 */
import {
  columnDefinitions,
  type DialectColumns,
  KEY_PRIMARY_KEY,
  type KeyColumnName,
  prismaModelText,
} from '../stores/key-table.ts';
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

interface Index {
  suffix: string;
  columns: readonly KeyColumnName[];
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
  const columnLines = columnDefinitions(COLUMNS, quote);
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${quoted} (\n${columnLines.join('\n')}\n\n` +
      `    PRIMARY KEY (${columnList(KEY_PRIMARY_KEY)})\n);`,
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
  return prismaModelText({
    comment: [
      'One row per (principal, procedure, Idempotency-Key): the claim, then the stored response every duplicate',
      'gets back. The primary key is the whole contract: the claim is one INSERT … ON CONFLICT on it.',
      'Written only through @idem/idempotency/sqlite (times are SQLite-clock ISO-8601 text).',
    ],
    columns: COLUMNS,
    indexes: INDEXES.map((index) => ({ ...index, map: `${table}_${index.suffix}` })),
    table,
  });
}
