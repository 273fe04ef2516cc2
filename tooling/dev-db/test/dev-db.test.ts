/**
 * The dev database tooling on the suite's Postgres server: a scratch database comes up migrated, the seed can
 * run twice without duplicating anything, and the database is gone after the drop.
 */
import { createPrismaClient } from '@idem/db';
import { afterAll, describe, expect, it } from 'vitest';
import { appliedMigrations, migrateDatabase, migrationNames } from '../src/migrate.ts';
import { createDatabase, databaseExists, dropDatabase, scratchDatabaseName } from '../src/postgres.ts';
import { seedDatabase } from '../src/seed.ts';
import { demoProducts, demoUsers } from '../src/seed-data.ts';

const adminUrl = process.env.DATABASE_URL;
if (!adminUrl) throw new Error('DATABASE_URL is not set: run the tests from the repo root');

const name = scratchDatabaseName('devdb_test');
afterAll(() => dropDatabase(adminUrl, name));

describe('@idem/dev-db', () => {
  it('creates, migrates, seeds twice and drops a scratch database', async () => {
    const url = await createDatabase(adminUrl, name);
    expect(await databaseExists(adminUrl, name)).toBe(true);

    const { applied } = await migrateDatabase(url);
    expect(applied).toEqual(migrationNames());
    expect(await appliedMigrations(url)).toEqual(migrationNames());

    const db = createPrismaClient({ connectionString: url, max: 2 });
    try {
      expect(await seedDatabase(db)).toEqual({ productsCreated: demoProducts.length });
      expect(await seedDatabase(db)).toEqual({ productsCreated: 0 });
      expect(await db.product.count()).toBe(demoProducts.length);
      expect(await db.user.count()).toBe(demoUsers.length);
      expect(await db.apiToken.count()).toBe(demoUsers.length);
    } finally {
      await db.$disconnect();
    }

    await dropDatabase(adminUrl, name);
    expect(await databaseExists(adminUrl, name)).toBe(false);
  });
});
