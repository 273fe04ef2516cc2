/**
 * A Prisma client for provider sqlite on one database file, through Prisma's better-sqlite3 adapter: the SQLite
 * store's test fixture. The generated client lives in ./generated (`prisma generate`, git-ignored).
 */
import { PrismaBetterSqlite3 } from '@prisma/adapter-better-sqlite3';
import { PrismaClient } from './generated/prisma/client.ts';

export * from './generated/prisma/client.ts';

export interface SqliteDatabaseOptions {
  /** The database file (created if missing). */
  file: string;
  /**
   * SQLite's `busy_timeout`: how long a statement waits for another connection's write lock before failing with
   * SQLITE_BUSY. better-sqlite3's default is 5 000 ms.
   */
  busyTimeoutMs?: number;
  /** Wraps the driver adapter factory before the client gets it (e.g. `withTransactionFence`). */
  wrapAdapter?: (factory: PrismaBetterSqlite3) => PrismaBetterSqlite3;
}

export function createSqlitePrismaClient({
  file,
  busyTimeoutMs = 5_000,
  wrapAdapter = (factory) => factory,
}: SqliteDatabaseOptions): SqliteDatabase {
  return new PrismaClient({
    adapter: wrapAdapter(new PrismaBetterSqlite3({ url: `file:${file}`, timeout: busyTimeoutMs })),
  });
}

export type SqliteDatabase = PrismaClient;
