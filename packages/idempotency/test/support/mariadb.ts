/**
 * Test helpers for the MariaDB store: a scratch database per test file on the local MariaDB (MARIADB_URL, else
 * 127.0.0.1:3306 root) holding only the key table the library defines (`mariadbIdempotencyKeysSchema()`).
 */
import {
  createMariadbPrismaClient,
  createScratchMariadb,
  type MariadbPrismaClient,
  type ScratchMariadb,
} from '@idem/mariadb-test-db';
import { mariadbIdempotencyKeysSchema } from '../../src/mariadb/index.ts';

export interface MariadbWithOwnTable {
  db: MariadbPrismaClient;
  scratch: ScratchMariadb;
  /** Disconnects and drops the scratch database. */
  dispose(): Promise<void>;
}

export async function connectMariadbWithOwnTable(connectionLimit = 10): Promise<MariadbWithOwnTable> {
  const scratch = await createScratchMariadb();
  await scratch.execute(mariadbIdempotencyKeysSchema().statements);
  const db = createMariadbPrismaClient(scratch.url, connectionLimit);
  return {
    db,
    scratch,
    async dispose() {
      await db.$disconnect();
      await scratch.drop();
    },
  };
}
