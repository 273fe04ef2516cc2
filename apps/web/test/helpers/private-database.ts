/**
 * A migrated database of the test's own, on the run's Postgres server: for assertions on global counts
 * (gauges over every key, running totals) that parallel test files writing to the shared database would
 * otherwise disturb. Created and dropped around the file (createPrivateDatabase in beforeAll, drop in afterAll).
 */
import { createPrismaClient, type Database } from '@idem/db';
import { migrateDatabase } from '@idem/dev-db/migrate';
import { createDatabase, dropDatabase, scratchDatabaseName } from '@idem/dev-db/postgres';
import { inject } from 'vitest';

// Provided by tests/setup/database.ts (the global setup); declared again here for this package's typecheck.
declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string;
  }
}

export interface PrivateDatabase {
  url: string;
  db: Database;
  drop(): Promise<void>;
}

export async function createPrivateDatabase(prefix: string): Promise<PrivateDatabase> {
  const adminUrl = inject('postgresAdminUrl');
  const name = scratchDatabaseName(prefix);
  const url = await createDatabase(adminUrl, name);
  await migrateDatabase(url);
  const db = createPrismaClient({ connectionString: url, max: 4 });
  return {
    url,
    db,
    async drop() {
      await db.$disconnect();
      await dropDatabase(adminUrl, name);
    },
  };
}
