/** The MariaDB store on a scratch database of MARIADB_URL's server (default 127.0.0.1:3306, root). */
import type { IdempotencyStore } from '@idem/idempotency';
import { createMariadbIdempotencyStore, mariadbIdempotencyKeysSchema } from '@idem/idempotency/mariadb';
import { createMariadbPrismaClient, createScratchMariadb } from '@idem/mariadb-test-db';
import { onScratchDatabase, type StoreFactory } from './store-under-test.ts';

export const mariadbStore: StoreFactory = async (connections) => {
  const scratch = await createScratchMariadb('idem_bench_stores');
  await scratch.execute(mariadbIdempotencyKeysSchema().statements);
  const db = createMariadbPrismaClient(scratch.url, connections);
  const [settings] = await db.$queryRawUnsafe<Array<{ version: string; flush: bigint; binlog: bigint }>>(
    'SELECT VERSION() AS version, @@innodb_flush_log_at_trx_commit AS flush, @@log_bin AS binlog',
  );
  return onScratchDatabase(db, () => scratch.drop(), {
    name: `MariaDB ${settings?.version.split('-')[0] ?? '?'}`,
    durability: `innodb_flush_log_at_trx_commit=${settings?.flush}, log_bin=${settings?.binlog}`,
    store: createMariadbIdempotencyStore(db) as IdempotencyStore<unknown>,
  });
};
