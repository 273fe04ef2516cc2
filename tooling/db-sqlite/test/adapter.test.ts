/**
 * The fixture's driver stack as installed: Prisma's better-sqlite3 adapter asks for better-sqlite3 ^12.6, and the
 * workspace overrides it to 13 (pnpm-workspace.yaml). These tests prove the adapter really runs on 13 here, on a
 * SQLite new enough for the store's clock.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqlitePrismaClient } from '../src/index.ts';

const adapterEntry = createRequire(import.meta.url).resolve('@prisma/adapter-better-sqlite3');
const fromAdapter = createRequire(adapterEntry);

describe('the better-sqlite3 the adapter loads', () => {
  it('is 13.x (the override), not the ^12.6 the adapter asks for', () => {
    const { version } = fromAdapter('better-sqlite3/package.json') as { version: string };
    expect(version).toMatch(/^13\./);
    const adapterManifest = JSON.parse(
      readFileSync(path.join(path.dirname(adapterEntry), '..', 'package.json'), 'utf8'),
    ) as { name: string; dependencies: Record<string, string> };
    expect(adapterManifest.name).toBe('@prisma/adapter-better-sqlite3');
    const { dependencies } = adapterManifest;
    expect(dependencies['better-sqlite3']).toBe('^12.6.0'); // what the override overrides
  });

  it('runs queries, transactions and SQLite ≥ 3.42 time functions through Prisma', async () => {
    const db = createSqlitePrismaClient({ file: ':memory:' });
    try {
      const [row] = await db.$queryRawUnsafe<Array<{ version: string; subsec: number; ms: string }>>(
        `select sqlite_version() as version, unixepoch('subsec') as subsec, strftime('%f', 'now') as ms`,
      );
      const [major = 0, minor = 0] = (row?.version ?? '').split('.').map(Number);
      expect(major * 1000 + minor).toBeGreaterThanOrEqual(3042);
      expect(row?.ms).toMatch(/^\d\d\.\d{3}$/);
      const inTx = await db.$transaction(async (tx) =>
        tx.$queryRawUnsafe<Array<{ one: bigint }>>('select 1 as one'),
      );
      // An expression column has no declared type: the adapter reads SQLite integers as bigint.
      expect(inTx).toEqual([{ one: 1n }]);
    } finally {
      await db.$disconnect();
    }
  });
});
