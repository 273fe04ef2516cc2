/**
 * What the benchmarks take from the dev database tooling (@idem/dev-db: Postgres, migrations, the demo seed)
 * and the repository's layout; every other module of the bench package imports them from here.
 */
import path from 'node:path';

export { migrateDatabase, repoRoot } from '@idem/dev-db/migrate';
export {
  createDatabase,
  dropDatabase,
  messageOf,
  redact,
  scratchDatabaseName,
  useExternalServer,
  withDatabase,
} from '@idem/dev-db/postgres';
export { seedDatabase } from '@idem/dev-db/seed';
export { demoUsers } from '@idem/dev-db/seed-data';

/** apps/bench: where this package's own dependencies (the peers' libraries) are installed. */
export const benchRoot = path.resolve(import.meta.dirname, '..');
