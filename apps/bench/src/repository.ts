/**
 * What the benchmarks take from the repository root rather than from a workspace package: the dev stack's
 * Postgres and migration helpers (scripts/lib) and the demo seed (prisma/). This is the one module of the bench
 * package that imports across its own root; every other module imports them from here.
 */
import path from 'node:path';

export { seedDatabase } from '../../../prisma/seed.ts';
export { demoUsers } from '../../../prisma/seed-data.ts';
export { migrateDatabase, repoRoot } from '../../../scripts/lib/migrate.ts';
export {
  createDatabase,
  dropDatabase,
  messageOf,
  redact,
  scratchDatabaseName,
  useExternalServer,
  withDatabase,
} from '../../../scripts/lib/postgres.ts';

/** apps/bench: where this package's own dependencies (the peers' libraries) are installed. */
export const benchRoot = path.resolve(import.meta.dirname, '..');
