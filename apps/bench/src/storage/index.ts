/**
 * The storage section of the benchmarks (issue #7): P6 (cleanup of 1 M expired keys while claims run),
 * partitioned expiry, and growth (claim / replay with 10 k, 1 M, 10 M rows). Everything runs in ONE scratch
 * database on DATABASE_URL's server, migrated with the repo's migrations, dropped at the end.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { createPrismaClient } from '@idem/db';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import pg from 'pg';
import { redact, withDatabase } from '../repository.ts';
import type { Teardown } from '../teardown.ts';
import type { Store } from './claim-probe.ts';
import { benchCleanup, type StorageContext } from './cleanup-p6.ts';
import { benchGrowth } from './growth.ts';
import { benchPartitionedExpiry } from './partitioned-expiry.ts';
import { P6_TARGETS, type StorageBenchResult } from './report.ts';
import { createMigratedScratchDatabase } from './scratch-database.ts';
import type { StorageSettings } from './settings.ts';

export { Teardown } from '../teardown.ts';
export { storageMarkdown } from './report.ts';
export { readStorageSettings } from './settings.ts';

export async function runStorageBench(options: {
  adminUrl: string;
  settings: StorageSettings;
  teardown: Teardown;
  log: (line: string) => void;
  command: string;
}): Promise<StorageBenchResult> {
  const { adminUrl, settings, teardown, log } = options;
  const started = performance.now();
  const database = await createMigratedScratchDatabase(adminUrl, teardown);
  log(`scratch database ${database.name} on ${redact(withDatabase(adminUrl, ''))}, migrated`);

  const client = new pg.Client({ connectionString: database.url });
  client.on('error', (error) => log(`connection error: ${error.message}`));
  await client.connect();
  teardown.add(() => client.end());
  const db = createPrismaClient({ connectionString: database.url, max: 1 });
  teardown.add(() => db.$disconnect());
  const storeFor = (table: string): Store => createPrismaIdempotencyStore(db, { table });
  const context: StorageContext = {
    databaseUrl: database.url,
    client,
    store: storeFor('idempotency_keys'),
    storeFor,
    settings,
    log,
  };
  const setting = async (name: string) =>
    (await client.query<{ value: string }>(`select current_setting($1) as value`, [name])).rows[0]?.value ??
    '?';

  const result: StorageBenchResult = {
    date: new Date().toISOString(),
    command: options.command,
    machine: {
      cpus: os.cpus().length,
      node: process.version,
      postgres: await setting('server_version'),
      platform: `${os.platform()} ${os.release()}`,
      sharedBuffers: await setting('shared_buffers'),
    },
    settings: { ...settings, sections: [...settings.sections] },
    seconds: 0,
  };

  if (settings.sections.has('p6')) {
    const p6 = await benchCleanup(context);
    const first = p6.runs[0];
    result.p6 = {
      ...p6,
      targets: P6_TARGETS,
      met: {
        cleanup: first?.cleanup !== undefined && first.cleanup.ms <= P6_TARGETS.cleanupSeconds * 1000,
        worstClaim:
          first !== undefined && Math.max(first.during.worst, first.after.worst) <= P6_TARGETS.worstClaimMs,
      },
    };
  }
  if (settings.sections.has('partitions') && settings.partitionRows > 0) {
    result.partitions = await benchPartitionedExpiry(context);
  }
  if (settings.sections.has('growth') && settings.growthRows.length > 0) {
    result.growth = await benchGrowth(context);
  }
  result.seconds = (performance.now() - started) / 1000;
  return result;
}
