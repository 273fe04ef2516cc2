/**
 * A throw-away database on DATABASE_URL's server, migrated with the repo's own migrations (the real
 * `idempotency_keys` table and its indexes); dropped by the caller's Teardown.
 */
import { createDatabase, dropDatabase, migrateDatabase, scratchDatabaseName } from '../repository.ts';
import type { Teardown } from '../teardown.ts';

export interface ScratchDatabase {
  name: string;
  url: string;
}

export async function createMigratedScratchDatabase(
  adminUrl: string,
  teardown: Teardown,
): Promise<ScratchDatabase> {
  const name = scratchDatabaseName('idem_bench_storage');
  const url = await createDatabase(adminUrl, name);
  teardown.add(() => dropDatabase(adminUrl, name));
  await migrateDatabase(url);
  return { name, url };
}
