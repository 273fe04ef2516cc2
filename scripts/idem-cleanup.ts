/**
 * `pnpm idem:cleanup`: the worker's scheduled cleanup, by hand — expired idempotency keys (never one whose
 * lease is live) and processed webhook events past their retention, in batches. Safe while the app serves
 * traffic and safe to run twice at once.
 */

import { formatCleanupSummary, runCleanup } from '@idem/cleanup';
import { createPrismaClient } from '@idem/db';
import { EMBEDDED_PASSWORD, EMBEDDED_USER } from '@idem/dev-db/postgres';

const embeddedDevUrl = `postgresql://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${process.env.EMBEDDED_PG_PORT ?? 54329}/idem`;
const connectionString = process.env.DATABASE_URL ?? embeddedDevUrl;
const batchSize = Number(process.env.IDEM_CLEANUP_BATCH ?? 10_000);
const retentionHours = Number(process.env.PROCESSED_EVENTS_RETENTION_HOURS ?? 72);

const db = createPrismaClient({ connectionString, max: 1 });
try {
  console.log(
    `idem:${formatCleanupSummary(await runCleanup(db, { batchSize, processedEventsRetentionHours: retentionHours }))}`,
  );
} catch (error) {
  // Prisma's message repeats the invocation; its last line is the database's own explanation.
  const message = (error instanceof Error ? error.message : String(error)).trim().split('\n').at(-1);
  console.error(
    `idem:cleanup failed: ${message}\n` +
      (process.env.DATABASE_URL
        ? ''
        : `(no DATABASE_URL: tried the \`pnpm dev\` database at ${embeddedDevUrl}; is it running?)`),
  );
  process.exitCode = 1;
} finally {
  await db.$disconnect();
}
