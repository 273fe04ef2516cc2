/** The Postgres store on a scratch database of DATABASE_URL's server, holding only the library's key table. */
import { createPrismaClient } from '@idem/db';
import type { IdempotencyStore } from '@idem/idempotency';
import { createPrismaIdempotencyStore, idempotencyKeysSchema } from '@idem/idempotency/prisma';
import { createDatabase, dropDatabase, scratchDatabaseName, useExternalServer } from '../repository.ts';
import { onScratchDatabase, type StoreFactory } from './store-under-test.ts';

export const postgresStore: StoreFactory = async (connections) => {
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const name = scratchDatabaseName('idem_bench_stores');
  const url = await createDatabase(server.adminUrl, name);
  const db = createPrismaClient({ connectionString: url, max: connections });
  for (const statement of idempotencyKeysSchema().statements) await db.$executeRawUnsafe(statement);
  const [settings] = await db.$queryRawUnsafe<Array<{ version: string; fsync: string; commit: string }>>(
    `select current_setting('server_version') as version, current_setting('fsync') as fsync,
            current_setting('synchronous_commit') as commit`,
  );
  return onScratchDatabase(db, () => dropDatabase(server.adminUrl, name), {
    name: `PostgreSQL ${settings?.version.split(' ')[0] ?? '?'}`,
    durability: `fsync=${settings?.fsync}, synchronous_commit=${settings?.commit}`,
    store: createPrismaIdempotencyStore(db) as IdempotencyStore<unknown>,
  });
};
