/**
 * The MariaDB key table from its one source (`mariadbIdempotencyKeysSchema`): the DDL creates on a real MariaDB
 * exactly the columns, key and indexes the store's statements use; the test client's Prisma model is the
 * generated `prismaModel`, and that client reads through its model a row the store wrote in the DDL's table.
 */

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprintRequest } from '../src/index.ts';
import { createMariadbIdempotencyStore, mariadbIdempotencyKeysSchema } from '../src/mariadb/index.ts';
import { bareMariadbTableName } from '../src/mariadb/sql.ts';
import { uniqueScope } from './support/db.ts';
import { connectMariadbWithOwnTable, type MariadbWithOwnTable } from './support/mariadb.ts';

let mariadb: MariadbWithOwnTable;
beforeAll(async () => {
  mariadb = await connectMariadbWithOwnTable(2);
});
afterAll(async () => {
  await mariadb?.dispose();
});

const fixtureSchema = () => {
  const packageJson = createRequire(import.meta.url).resolve('@idem/mariadb-test-db/package.json');
  return readFileSync(path.join(path.dirname(packageJson), 'prisma/schema.prisma'), 'utf8');
};

describe('mariadbIdempotencyKeysSchema', () => {
  it('the test client is generated from the library’s own model, with provider mysql', () => {
    const schema = fixtureSchema();
    expect(schema).toContain(mariadbIdempotencyKeysSchema().prismaModel);
    expect(schema).toMatch(/provider = "mysql"/);
  });

  it('the package README shows the generated DDL verbatim', () => {
    const readme = readFileSync(path.resolve(import.meta.dirname, '../README.md'), 'utf8');
    expect(readme).toContain(`\`\`\`sql\n${mariadbIdempotencyKeysSchema().ddl}\`\`\``);
  });

  it('the DDL creates the columns, the primary key and the indexes the store relies on; run again, it changes nothing', async () => {
    const db = mariadb.db;
    const columns = await db.$queryRawUnsafe<Array<{ name: string; type: string; nullable: string }>>(
      `SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, IS_NULLABLE AS nullable FROM information_schema.COLUMNS
       WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'idempotency_keys' ORDER BY ORDINAL_POSITION`,
    );
    expect(columns.map((column) => `${column.name} ${column.type} ${column.nullable}`)).toEqual([
      'scope varbinary(512) NO',
      'procedure varbinary(255) NO',
      'key varbinary(255) NO',
      'fingerprint char(64) NO',
      'state varchar(16) NO',
      'response mediumtext YES',
      'http_status int(11) YES',
      'lease_owner char(36) YES',
      'locked_until datetime(6) YES',
      'created_at datetime(6) NO',
      'expires_at datetime(6) NO',
      'replay_count int(11) NO',
    ]);
    const indexes = await db.$queryRawUnsafe<Array<{ name: string; columns: string; unique: bigint }>>(
      `SELECT INDEX_NAME AS name, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS columns, 1 - MAX(NON_UNIQUE) AS \`unique\`
       FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'idempotency_keys'
       GROUP BY INDEX_NAME ORDER BY INDEX_NAME`,
    );
    expect(
      indexes.map((index) => `${index.name}(${index.columns})${Number(index.unique) ? ' unique' : ''}`),
    ).toEqual([
      'idempotency_keys_expires_at_idx(expires_at)',
      'idempotency_keys_in_flight_idx(scope,state)',
      'PRIMARY(scope,procedure,key) unique',
    ]);
    expect(mariadbIdempotencyKeysSchema().indexes).toEqual([
      { name: 'idempotency_keys_expires_at_idx', columns: ['expires_at'] },
      { name: 'idempotency_keys_in_flight_idx', columns: ['scope', 'state'] },
    ]);
    const [engine] = await db.$queryRawUnsafe<Array<{ engine: string }>>(
      `SELECT ENGINE AS engine FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'idempotency_keys'`,
    );
    expect(engine?.engine).toBe('InnoDB');

    // Re-runnable: the statement again, on the table it made, changes nothing and fails on nothing.
    const showCreate = async () =>
      db.$queryRawUnsafe<Array<Record<string, string>>>('SHOW CREATE TABLE idempotency_keys');
    const before = await showCreate();
    await mariadb.scratch.execute(mariadbIdempotencyKeysSchema().statements);
    expect(await showCreate()).toEqual(before);
    // Control: without IF NOT EXISTS, the second run fails on the table that is there.
    const [createTable = ''] = mariadbIdempotencyKeysSchema().statements;
    await expect(
      mariadb.scratch.execute([createTable.replace('CREATE TABLE IF NOT EXISTS', 'CREATE TABLE')]),
    ).rejects.toThrow(/already exists/);
  });

  it('the Prisma model reads the row the store wrote in the DDL’s table', async () => {
    const store = createMariadbIdempotencyStore(mariadb.db);
    const request = {
      scope: uniqueScope(),
      procedure: 'orders.place',
      key: randomUUID(),
      fingerprint: fingerprintRequest('orders.place', { a: 1 }),
      owner: randomUUID(),
      leaseSeconds: 30,
      retentionSeconds: 3_600,
    };
    await store.claim(request);
    await store.complete(request, request.owner, { kind: 'output', httpStatus: 201, body: '{"json":1}' });
    const bytes = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
    const row = await mariadb.db.idempotencyKey.findUnique({
      where: {
        scope_procedure_key: {
          scope: bytes(request.scope),
          procedure: bytes(request.procedure),
          key: bytes(request.key),
        },
      },
    });
    expect(row && Buffer.from(row.key).toString('utf8')).toBe(request.key);
    expect(row).toMatchObject({
      fingerprint: request.fingerprint,
      state: 'completed',
      httpStatus: 201,
      replayCount: 0,
    });
    const record = await store.find(request);
    expect(row?.createdAt.getTime()).toBe(record?.createdAt.getTime());
    expect(row?.expiresAt.getTime()).toBe(record?.expiresAt.getTime());
  });

  it('a table of another name (and database) gets its own names; a name that is not an identifier is refused', () => {
    const schema = mariadbIdempotencyKeysSchema('shop.idem_keys');
    expect(schema.ddl).toMatch(/^CREATE TABLE IF NOT EXISTS `shop`\.`idem_keys` \(/);
    expect(schema.indexes.map((index) => index.name)).toEqual([
      'idem_keys_expires_at_idx',
      'idem_keys_in_flight_idx',
    ]);
    expect(schema.prismaModel).toContain('@@map("idem_keys")');
    expect(() => mariadbIdempotencyKeysSchema('keys`; DROP TABLE x')).toThrow(/Invalid table name/);
    // The bare name index names are made from: the table without its database, refused like the whole name.
    expect(bareMariadbTableName('shop.idem_keys')).toBe('idem_keys');
    expect(bareMariadbTableName('idem_keys')).toBe('idem_keys');
    expect(() => bareMariadbTableName('keys`; DROP TABLE x')).toThrow(/Invalid table name/);
  });
});
