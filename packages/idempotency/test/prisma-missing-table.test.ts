/**
 * A database without the key table: the claim fails with `IdempotencyTableMissingError`, which names the
 * table and how to create it, instead of Prisma's raw "relation … does not exist"; over tRPC the client gets
 * a plain 500 whose body names nothing internal, and the server's `onError` gets the explanation as the cause.
 */
import type { Database } from '@idem/db';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyStoreSetupError } from '../src/index.ts';
import { createPrismaIdempotencyStore, IdempotencyTableMissingError } from '../src/prisma/index.ts';
import { explainingMissingTable } from '../src/prisma/missing-table.ts';
import { connectWithOwnTable, uniqueScope, uniqueTableName } from './support/db.ts';
import { createTestTRPC } from './support/trpc.ts';

let db: Database;
const missingTable = uniqueTableName('nowhere');
/** In a schema that does not exist either (Postgres reports that one differently). */
const missingSchemaTable = `${uniqueTableName('nowhere')}.idempotency_keys`;

beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

const claimRequest = () => ({
  scope: uniqueScope(),
  procedure: 'notes.create',
  key: 'k-1',
  fingerprint: 'f'.repeat(64),
  owner: '00000000-0000-4000-8000-000000000000',
  leaseSeconds: 30,
  retentionSeconds: 60,
});

describe('a missing key table', () => {
  it('control: the raw statement fails with Postgres’ bare message, naming no fix', async () => {
    const raw = db.$queryRawUnsafe(`select 1 from ${missingTable}`);
    await expect(raw).rejects.toThrow(/does not exist/);
    await expect(raw).rejects.not.toThrow(/idempotencyKeysSchema/);
  });

  it('the claim names the table and the fix', async () => {
    const store = createPrismaIdempotencyStore(db, { table: missingTable });
    const failure = await store.claim(claimRequest()).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(IdempotencyTableMissingError);
    expect(failure).toBeInstanceOf(IdempotencyStoreSetupError);
    const error = failure as IdempotencyTableMissingError;
    expect(error.table).toBe(missingTable);
    expect(error.message).toContain(missingTable);
    expect(error.name).toBe('IdempotencyTableMissingError');
    // Both ways to create it, and what to do for a table of another name.
    expect(error.message).toContain('add `idempotencyKeysSchema().prismaModel`');
    expect(error.message).toContain('to schema.prisma and run `prisma migrate dev`');
    expect(error.message).toContain('idempotencyKeysSchema().ddl');
    expect(error.message).toContain(
      'pass `{ table }` to createPrismaIdempotencyStore and idempotencyKeysSchema',
    );
    // The database's own error stays reachable for whoever debugs further.
    expect(String((error.cause as Error).message)).toMatch(/does not exist/);
  });

  it('the cleanup names it too, and so does a table in a schema that does not exist', async () => {
    const store = createPrismaIdempotencyStore(db, { table: missingTable });
    await expect(store.deleteExpiredBatch(10)).rejects.toBeInstanceOf(IdempotencyTableMissingError);
    const elsewhere = createPrismaIdempotencyStore(db, { table: missingSchemaTable });
    await expect(elsewhere.claim(claimRequest())).rejects.toBeInstanceOf(IdempotencyTableMissingError);
    await expect(elsewhere.deleteExpiredBatch(10)).rejects.toBeInstanceOf(IdempotencyTableMissingError);
  });

  it("an error that kept only Postgres' text (no SQLSTATE) is recognised too; any other error passes through", async () => {
    const explained = (message: string) =>
      explainingMissingTable('keys', () => Promise.reject(new Error(message))).then(
        () => null,
        (error: unknown) => error,
      );
    expect(await explained('relation "keys" does not exist')).toBeInstanceOf(IdempotencyTableMissingError);
    expect(await explained('Raw query failed: RELATION "billing"."keys" DOES NOT EXIST')).toBeInstanceOf(
      IdempotencyTableMissingError,
    );
    expect(await explained('schema "billing" does not exist')).toBeInstanceOf(IdempotencyTableMissingError);
    const other = await explained('column "nope" does not exist');
    expect(other).not.toBeInstanceOf(IdempotencyTableMissingError);
    expect((other as Error).message).toBe('column "nope" does not exist');
    expect(await explainingMissingTable('keys', async () => 'ran')).toBe('ran');
  });

  it('over HTTP: a plain 500 for the client, the explanation for the server log', async () => {
    const { t, idempotency } = createTestTRPC(db, undefined, {
      wrapStore: () => createPrismaIdempotencyStore(db, { table: missingTable }),
    });
    const router = t.router({ run: t.procedure.concat(idempotency.external()).mutation(() => 'ran') });
    const logged: unknown[] = [];
    const response = await fetchRequestHandler({
      endpoint: '/trpc',
      router,
      req: new Request('http://local/trpc/run', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'k-1' },
        body: '{}',
      }),
      createContext: ({ req, resHeaders }) => ({
        headers: req.headers,
        resHeaders,
        principalId: uniqueScope(),
      }),
      onError: ({ error }) => logged.push(error.cause),
    });
    expect(response.status).toBe(500);
    const body = await response.text();
    expect(body).not.toContain('does not exist');
    expect(body).not.toContain(missingTable);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toBeInstanceOf(IdempotencyTableMissingError);
  });
});
