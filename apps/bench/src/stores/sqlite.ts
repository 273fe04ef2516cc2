/**
 * The SQLite store on a scratch database file (WAL) holding only the library's key table, through Prisma's
 * better-sqlite3 adapter. The adapter gives a client ONE connection whatever `connections` says: concurrent
 * callers queue for it, and SQLite has one writer per file anyway.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createSqlitePrismaClient } from '@idem/db-sqlite';
import type { IdempotencyStore } from '@idem/idempotency';
import { createSqliteIdempotencyStore, sqliteIdempotencyKeysSchema } from '@idem/idempotency/sqlite';
import { onScratchDatabase, type StoreFactory } from './store-under-test.ts';

export const sqliteStore: StoreFactory = async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'idem-bench-sqlite-'));
  const db = createSqlitePrismaClient({ file: path.join(dir, 'keys.db') });
  await db.$queryRawUnsafe('pragma journal_mode = wal');
  for (const statement of sqliteIdempotencyKeysSchema().statements) await db.$executeRawUnsafe(statement);
  const [settings] = await db.$queryRawUnsafe<Array<{ version: string; synchronous: bigint | number }>>(
    'select sqlite_version() as version, (select synchronous from pragma_synchronous) as synchronous',
  );
  const synchronous =
    ['OFF', 'NORMAL', 'FULL', 'EXTRA'][Number(settings?.synchronous)] ?? String(settings?.synchronous);
  const removeFile = async () => rmSync(dir, { recursive: true, force: true });
  return onScratchDatabase(db, removeFile, {
    name: `SQLite ${settings?.version ?? '?'}`,
    durability: `journal_mode=wal, synchronous=${synchronous}, one connection (better-sqlite3 adapter), file on ${os.tmpdir()}`,
    store: createSqliteIdempotencyStore(db) as IdempotencyStore<unknown>,
  });
};
