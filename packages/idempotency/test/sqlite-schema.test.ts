/**
 * The SQLite table from its one source: the DDL creates exactly the columns, key and indexes the store relies
 * on, and the test fixture's Prisma model is the one `sqliteIdempotencyKeysSchema().prismaModel` prints.
 */

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createSqlitePrismaClient } from '@idem/db-sqlite';
import { describe, expect, it } from 'vitest';
import { fingerprintRequest } from '../src/index.ts';
import { createSqliteIdempotencyStore, sqliteIdempotencyKeysSchema } from '../src/sqlite/index.ts';
import { createSqliteKeyTable, scratchSqliteFile } from './support/sqlite-db.ts';

describe('sqliteIdempotencyKeysSchema', () => {
  it('its DDL creates the columns, primary key and indexes the store uses; run again, it changes nothing', async () => {
    const file = scratchSqliteFile();
    await createSqliteKeyTable(file);
    const db = createSqlitePrismaClient({ file });
    try {
      const columns = await db.$queryRawUnsafe<
        Array<{ name: string; type: string; notnull: bigint | number; pk: bigint | number }>
      >(`select name, type, "notnull", pk from pragma_table_info('idempotency_keys') order by cid`);
      expect(
        columns.map((column) => [column.name, column.type, Number(column.notnull), Number(column.pk)]),
      ).toEqual([
        ['scope', 'TEXT', 1, 1],
        ['procedure', 'TEXT', 1, 2],
        ['key', 'TEXT', 1, 3],
        ['fingerprint', 'TEXT', 1, 0],
        ['state', 'TEXT', 1, 0],
        ['response', 'TEXT', 0, 0],
        ['http_status', 'INTEGER', 0, 0],
        ['lease_owner', 'TEXT', 0, 0],
        ['locked_until', 'DATETIME', 0, 0],
        ['created_at', 'DATETIME', 1, 0],
        ['expires_at', 'DATETIME', 1, 0],
        ['replay_count', 'INTEGER', 1, 0],
      ]);
      const indexes = await db.$queryRawUnsafe<Array<{ name: string; columns: string }>>(
        `select il.name as name, (select group_concat(name, ',') from pragma_index_info(il.name)) as columns
         from pragma_index_list('idempotency_keys') il where il.origin = 'c' order by il.name`,
      );
      expect(indexes).toEqual(
        sqliteIdempotencyKeysSchema().indexes.map((index) => ({
          name: index.name,
          columns: index.columns.join(','),
        })),
      );
      // A rowid table: the cleanup's batch delete names rows by rowid.
      expect(await db.$queryRawUnsafe('select rowid from idempotency_keys limit 1')).toEqual([]);

      // Re-runnable: the statements again, on the table they made, change nothing and fail on nothing.
      const before = await db.$queryRawUnsafe('select type, name, sql from sqlite_schema order by name');
      for (const statement of sqliteIdempotencyKeysSchema().statements) await db.$executeRawUnsafe(statement);
      expect(await db.$queryRawUnsafe('select type, name, sql from sqlite_schema order by name')).toEqual(
        before,
      );
      // Control: without IF NOT EXISTS, the second run fails on the table that is there.
      const [createTable = ''] = sqliteIdempotencyKeysSchema().statements;
      await expect(
        db.$executeRawUnsafe(createTable.replace('CREATE TABLE IF NOT EXISTS', 'CREATE TABLE')),
      ).rejects.toThrow(/already exists/);
    } finally {
      await db.$disconnect();
    }
  });

  it('the package README shows the generated model and SQL verbatim', () => {
    const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
    expect(readme).toContain(`\`\`\`prisma\n${sqliteIdempotencyKeysSchema().prismaModel}\`\`\``);
    expect(readme).toContain(`\`\`\`sql\n${sqliteIdempotencyKeysSchema().ddl}\`\`\``);
  });

  it('the fixture schema.prisma holds exactly the printed model; another table name is quoted and checked', () => {
    const schemaFile = fileURLToPath(
      new URL('../../../tooling/db-sqlite/prisma/schema.prisma', import.meta.url),
    );
    expect(readFileSync(schemaFile, 'utf8')).toContain(sqliteIdempotencyKeysSchema().prismaModel);
    const custom = sqliteIdempotencyKeysSchema('my_keys');
    expect(custom.statements[0]).toMatch(/^CREATE TABLE IF NOT EXISTS "my_keys" \(/);
    expect(custom.prismaModel).toContain('@@map("my_keys")');
    expect(() => sqliteIdempotencyKeysSchema('main.keys')).toThrow(/Invalid table/);
  });

  it("a client generated from the model reads the store's rows (types, names, times)", async () => {
    const file = scratchSqliteFile();
    await createSqliteKeyTable(file);
    const db = createSqlitePrismaClient({ file });
    try {
      const store = createSqliteIdempotencyStore(db);
      const key = { scope: 'model', procedure: 'orders.place', key: randomUUID() };
      const owner = randomUUID();
      const fingerprint = fingerprintRequest(key.procedure, {});
      await store.claim({ ...key, fingerprint, owner, leaseSeconds: 30, retentionSeconds: 60 });
      await store.complete(key, owner, { kind: 'output', httpStatus: 201, body: '{"json":1}' });
      const row = await db.idempotencyKey.findUnique({ where: { scope_procedure_key: key } });
      expect(row).toMatchObject({ ...key, fingerprint, state: 'completed', httpStatus: 201, replayCount: 0 });
      expect(row?.createdAt).toBeInstanceOf(Date);
      expect((row?.expiresAt.getTime() ?? 0) - (row?.createdAt.getTime() ?? 0)).toBe(60_000);
      expect(Math.abs((row?.createdAt.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
    } finally {
      await db.$disconnect();
    }
  });
});
