/**
 * Test helpers: the library's own key table in a scratch schema of this run's database (see the root
 * vitest.config.ts), and unique names per test.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createPrismaClient, type Database } from '@idem/db';
import { idempotencyKeysSchema, idempotencyStatementName } from '../../src/prisma/index.ts';

export function databaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run the tests through the root vitest config.');
  return url;
}

/**
 * A client on this run's (migrated) database, its app tables included, configured as the app's: the store's
 * statements prepared (`idempotencyStatementName`).
 */
export function connect(max = 10): Database {
  return createPrismaClient({
    connectionString: databaseUrl(),
    max,
    statementName: idempotencyStatementName,
  });
}

/**
 * A client whose `search_path` is a new schema holding only the key table the library itself defines
 * (`idempotencyKeysSchema().statements`): unqualified `idempotency_keys`, and any table a test creates, live
 * there, so the tests need none of the app's migrations. The schema goes with the run's database. The store's
 * statements are prepared, as the app configures it, unless `prepared` is false.
 */
export async function connectWithOwnTable(max = 10, { prepared = true } = {}): Promise<Database> {
  return createPrismaClient({
    connectionString: await ownTableUrl(),
    max,
    ...(prepared ? { statementName: idempotencyStatementName } : {}),
  });
}

/** A connection string whose `search_path` is a new schema holding only the library's key table (see above). */
export async function ownTableUrl(): Promise<string> {
  const schema = uniqueTableName('idem_lib');
  const setup = createPrismaClient({ connectionString: databaseUrl(), max: 1 });
  try {
    await setup.$executeRawUnsafe(`create schema "${schema}"`);
    for (const statement of idempotencyKeysSchema(`${schema}.idempotency_keys`).statements)
      await setup.$executeRawUnsafe(statement);
  } finally {
    await setup.$disconnect();
  }
  return withSearchPath(databaseUrl(), schema);
}

/** `url` with libpq's `options` set so every connection of the pool starts with `search_path = schema`. */
function withSearchPath(url: string, schema: string): string {
  const options = encodeURIComponent(`-c search_path=${schema}`);
  return `${url}${url.includes('?') ? '&' : '?'}options=${options}`;
}

/** Test files share one database and run in parallel: every test uses scopes of its own. */
export function uniqueScope(): string {
  return `test:${randomUUID()}`;
}

/** A table name no other test uses. */
export function uniqueTableName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns true (or throws after `timeoutMs`). */
export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('waitUntil: timed out');
    await sleep(10);
  }
}
