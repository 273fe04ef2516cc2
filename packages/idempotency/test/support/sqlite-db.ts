/**
 * Test helpers for the SQLite store: a fresh database file per call, in WAL mode, holding only the key table the
 * library defines (`sqliteIdempotencyKeysSchema().statements`).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createSqlitePrismaClient, type SqliteDatabase } from '@idem/db-sqlite';
import { sqliteIdempotencyKeysSchema } from '../../src/sqlite/index.ts';

/** A new, empty database file's path (its directory is the OS temp dir's, removed with it). */
export function scratchSqliteFile(): string {
  return path.join(mkdtempSync(path.join(os.tmpdir(), 'idem-sqlite-')), 'keys.db');
}

/**
 * Creates the key table in `file` (WAL mode, the recommended journal: readers never block the writer) and
 * returns a client on it.
 */
export async function createSqliteKeyTable(file: string, { wal = true } = {}): Promise<void> {
  const setup = createSqlitePrismaClient({ file });
  try {
    // PRAGMA journal_mode answers a row: a query, not an execute.
    await setup.$queryRawUnsafe(`pragma journal_mode = ${wal ? 'wal' : 'delete'}`);
    for (const statement of sqliteIdempotencyKeysSchema().statements)
      await setup.$executeRawUnsafe(statement);
  } finally {
    await setup.$disconnect();
  }
}

/** A client on a fresh database file with the key table. */
export async function connectSqlite(options: { wal?: boolean; busyTimeoutMs?: number } = {}): Promise<{
  db: SqliteDatabase;
  file: string;
}> {
  const file = scratchSqliteFile();
  await createSqliteKeyTable(file, options);
  return { db: createSqlitePrismaClient({ file, busyTimeoutMs: options.busyTimeoutMs }), file };
}
