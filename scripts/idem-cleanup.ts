/**
 * `pnpm idem:cleanup`: deletes expired idempotency keys in batches, never one whose lease is live.
 * Safe to run while the app serves traffic and safe to run twice at once.
 */
import { createPrismaClient } from '@idem/db';
import { cleanupExpiredKeys, createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { EMBEDDED_PASSWORD, EMBEDDED_USER } from './lib/postgres.ts';

const embeddedDevUrl = `postgresql://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${process.env.EMBEDDED_PG_PORT ?? 54329}/idem`;
const connectionString = process.env.DATABASE_URL ?? embeddedDevUrl;
const batchSize = Number(process.env.IDEM_CLEANUP_BATCH ?? 1_000);

const db = createPrismaClient({ connectionString, max: 1 });
try {
  const started = performance.now();
  const { deleted, batches } = await cleanupExpiredKeys(createPrismaIdempotencyStore(db), { batchSize });
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  console.log(
    `idem:cleanup removed ${deleted} expired keys in ${batches} batch(es) of ≤ ${batchSize} (${seconds} s)`,
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
