/**
 * The outbox table (Postgres): one row per message, written in the transaction of the effect that produced it,
 * published by the relay and then marked sent. Defined here once; the package README shows the output for the
 * default table, and a test checks it verbatim.
 */
import { bareTableName, quoteTable } from '../prisma/sql.ts';

export const DEFAULT_OUTBOX_TABLE = 'idempotency_outbox';

export interface OutboxSchema {
  /** The table as given (`idempotency_outbox`, or `schema.table`). */
  table: string;
  /** `CREATE TABLE IF NOT EXISTS` and its `CREATE … INDEX IF NOT EXISTS` statements: run again, they change nothing. */
  ddl: string;
  /** The statements of `ddl` one by one. */
  statements: string[];
}

/** The outbox table's definition for `table` (default `idempotency_outbox`). */
export function outboxSchema(table: string = DEFAULT_OUTBOX_TABLE): OutboxSchema {
  const quoted = quoteTable(table);
  const bare = bareTableName(table);
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${quoted} (
    "seq" BIGSERIAL NOT NULL,
    "id" VARCHAR(255) NOT NULL,
    "type" TEXT NOT NULL,
    "destination" TEXT NOT NULL,
    "body" TEXT NOT NULL,
    "headers" TEXT,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "sent_at" TIMESTAMPTZ(6),

    CONSTRAINT "${bare}_pkey" PRIMARY KEY ("seq")
);`,
    // The message id, once: enqueueing it again does nothing, and the consumer's inbox keys on it.
    `CREATE UNIQUE INDEX IF NOT EXISTS "${bare}_id_key" ON ${quoted}("id");`,
    // The relay's scan (sent_at IS NULL, in seq order) and the cleanup of sent rows (sent_at < …), one index.
    `CREATE INDEX IF NOT EXISTS "${bare}_sent_at_seq_idx" ON ${quoted}("sent_at","seq");`,
  ];
  return { table, ddl: `${statements.join('\n\n')}\n`, statements };
}
