/**
 * The key table is defined once (`idempotencyKeysSchema`): its DDL builds the same table as this repo's Prisma
 * migrations, its Prisma model is the one in prisma/schema.prisma, and the package README shows both verbatim.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKeysSchema } from '../src/prisma/index.ts';
import { connect, uniqueTableName } from './support/db.ts';

const root = path.resolve(import.meta.dirname, '../../..');
const readme = readFileSync(path.resolve(import.meta.dirname, '../README.md'), 'utf8');
const prismaSchema = readFileSync(path.join(root, 'prisma/schema.prisma'), 'utf8');

let db: Database;
beforeAll(() => {
  db = connect(2);
});
afterAll(async () => {
  await db.$disconnect();
});

interface TableShape {
  columns: string[];
  constraints: string[];
  indexes: string[];
}

/** Columns, constraints and indexes of `schema.table` as the catalog has them, with the names made relative. */
async function shapeOf(schema: string, table: string): Promise<TableShape> {
  const columns = await db.$queryRawUnsafe<Array<{ line: string }>>(
    `select column_name || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || is_nullable || ' ' ||
            coalesce(column_default, '-') as line
     from information_schema.columns c
     join pg_attribute a on a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass
                         and a.attname = c.column_name
     where table_schema = $1 and table_name = $2 order by ordinal_position`,
    schema,
    table,
  );
  const constraints = await db.$queryRawUnsafe<Array<{ line: string }>>(
    `select conname || ' ' || pg_get_constraintdef(oid) as line from pg_constraint
     where conrelid = format('%I.%I', $1::text, $2::text)::regclass order by conname`,
    schema,
    table,
  );
  const indexes = await db.$queryRawUnsafe<Array<{ line: string }>>(
    `select replace(indexdef, $1 || '.', '') as line from pg_indexes
     where schemaname = $1 and tablename = $2 order by indexname`,
    schema,
    table,
  );
  return {
    columns: columns.map((row) => row.line),
    constraints: constraints.map((row) => row.line),
    indexes: indexes.map((row) => row.line),
  };
}

/** A Prisma model block without its doc comments and with whitespace collapsed: what Prisma itself reads. */
function normalizedModel(text: string, model: string): string | null {
  const block = text.match(new RegExp(`^model ${model} \\{[\\s\\S]*?^\\}`, 'm'))?.[0];
  if (!block) return null;
  return block
    .split('\n')
    .filter((line) => !line.trim().startsWith('///'))
    .map((line) => line.trim().replace(/\s+/g, ' '))
    .filter((line) => line !== '')
    .join('\n');
}

// Each test builds the schema itself (not once for the file): what a test checks is then what it ran.
describe('the key table, defined once', () => {
  it('its DDL builds the table the migrations build: columns, primary key and every index, (state, scope) included; run again, it changes nothing', async () => {
    const scratch = uniqueTableName('idem_schema');
    await db.$executeRawUnsafe(`create schema "${scratch}"`);
    try {
      const { statements } = idempotencyKeysSchema(`${scratch}.idempotency_keys`);
      for (const statement of statements) await db.$executeRawUnsafe(statement);
      const migrated = await shapeOf('public', 'idempotency_keys');
      const fromDdl = await shapeOf(scratch, 'idempotency_keys');
      expect(migrated.indexes).toContain(
        'CREATE INDEX idempotency_keys_in_flight_idx ON idempotency_keys USING btree (state, scope)',
      );
      expect(fromDdl).toEqual(migrated);

      // Re-runnable: the same statements again change nothing and fail on nothing.
      for (const statement of statements) await db.$executeRawUnsafe(statement);
      expect(await shapeOf(scratch, 'idempotency_keys')).toEqual(migrated);
      // Control: without IF NOT EXISTS, the second run fails on the table that is there.
      const [createTable = ''] = statements;
      await expect(
        db.$executeRawUnsafe(createTable.replace('CREATE TABLE IF NOT EXISTS', 'CREATE TABLE')),
      ).rejects.toThrow(/already exists/);

      // Control: the same comparison notices a table without the in-flight index (the README's old SQL).
      await db.$executeRawUnsafe(`drop index "${scratch}"."idempotency_keys_in_flight_idx"`);
      expect(await shapeOf(scratch, 'idempotency_keys')).not.toEqual(migrated);
    } finally {
      await db.$executeRawUnsafe(`drop schema "${scratch}" cascade`);
    }
  });

  it('lists the indexes the store relies on', () => {
    const schema = idempotencyKeysSchema();
    expect(schema.indexes).toEqual([
      { name: 'idempotency_keys_expires_at_idx', columns: ['expires_at'] },
      { name: 'idempotency_keys_in_flight_idx', columns: ['state', 'scope'] },
    ]);
    expect(idempotencyKeysSchema('billing.keys').indexes.map((index) => index.name)).toEqual([
      'keys_expires_at_idx',
      'keys_in_flight_idx',
    ]);
    expect(idempotencyKeysSchema('billing.keys').ddl).toContain(
      'CREATE TABLE IF NOT EXISTS "billing"."keys"',
    );
    expect(() => idempotencyKeysSchema('keys; drop table x')).toThrow(/Invalid table name/);
  });

  it("its Prisma model is prisma/schema.prisma's (doc comments aside)", () => {
    const schema = idempotencyKeysSchema();
    const repoModel = normalizedModel(prismaSchema, 'IdempotencyKey');
    expect(repoModel).not.toBeNull();
    expect(normalizedModel(schema.prismaModel, 'IdempotencyKey')).toBe(repoModel);
    // Control: a model without the (state, scope) index is told apart.
    const withoutIndex = schema.prismaModel.replace(/^ {2}@@index\(\[state, scope\].*$/m, '');
    expect(normalizedModel(withoutIndex, 'IdempotencyKey')).not.toBe(repoModel);
  });

  it('the package README shows the generated model and SQL verbatim', () => {
    const schema = idempotencyKeysSchema();
    expect(readme).toContain(`\`\`\`prisma\n${schema.prismaModel}\`\`\``);
    expect(readme).toContain(`\`\`\`sql\n${schema.ddl}\`\`\``);
  });

  it('the model of a schema-qualified table maps the bare name, names its index after it and adds @@schema', () => {
    const model = idempotencyKeysSchema('billing.keys').prismaModel;
    // The default model with only the table's names changed, and the schema attribute (Prisma's multiSchema).
    expect(model).toBe(
      idempotencyKeysSchema()
        .prismaModel.replace('map: "idempotency_keys_in_flight_idx"', 'map: "keys_in_flight_idx"')
        .replace('  @@map("idempotency_keys")\n', '  @@map("keys")\n  @@schema("billing")\n'),
    );
    expect(model).toContain('\n  @@map("keys")\n  @@schema("billing")\n}\n');
    expect(idempotencyKeysSchema().prismaModel).not.toContain('@@schema');
  });
});
