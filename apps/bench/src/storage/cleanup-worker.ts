/**
 * Child process of the P6 bench: the cleanup exactly as the worker runs it, in its own process and on its own
 * Prisma client (as apps/worker does), so its CPU and event loop do not sit in the claim probe's process.
 *
 * argv: <database url> <mode> <batch size (0 = the worker's default)>
 *   mode `worker`: `runCleanup` from @idem/cleanup (what the scheduled job does);
 *   mode `store`:  the library's `cleanupExpiredKeys` on `createPrismaIdempotencyStore` (the bare batches);
 *   mode `ordered`: the same loop with a candidate statement (bench only): the store's batch delete plus
 *                  `ORDER BY expires_at`, which makes every batch walk the expires_at index from the oldest key.
 * Protocol on stdout, one JSON object per line: {"ready":true} once connected; then, after one line on stdin,
 * {"deleted":…,"batches":…,"ms":…} (or {"error":"…"}).
 */
import { createInterface } from 'node:readline';
import { runCleanup } from '@idem/cleanup';
import { createPrismaClient } from '@idem/db';
import { cleanupExpiredKeys, createPrismaIdempotencyStore } from '@idem/idempotency/prisma';

const [databaseUrl, mode = 'worker', rawBatch = '0'] = process.argv.slice(2);
if (!databaseUrl)
  throw new Error('usage: cleanup-worker.ts <database url> <worker|store|ordered> <batch size>');
const batchSize = Number(rawBatch) > 0 ? Number(rawBatch) : undefined;

const db = createPrismaClient({ connectionString: databaseUrl, max: 1 });

function orderedBatch(size: number): Promise<number> {
  return db.$executeRawUnsafe(
    `delete from idempotency_keys where ctid in (
       select ctid from idempotency_keys
       where expires_at <= now() and not (state = 'processing' and locked_until > now())
       order by expires_at limit $1 for update skip locked)`,
    size,
  );
}

function send(message: object): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

try {
  await db.$queryRawUnsafe('select 1');
  send({ ready: true });
  const lines = createInterface({ input: process.stdin });
  await new Promise<void>((resolve) => lines.once('line', () => resolve()));
  lines.close();
  const started = performance.now();
  const sizing = batchSize ? { batchSize } : {};
  const result =
    mode === 'store'
      ? await cleanupExpiredKeys(createPrismaIdempotencyStore(db), sizing)
      : mode === 'ordered'
        ? await cleanupExpiredKeys({ deleteExpiredBatch: orderedBatch }, sizing)
        : (await runCleanup(db, sizing)).idempotencyKeys;
  send({ deleted: result.deleted, batches: result.batches, ms: performance.now() - started });
} catch (error) {
  send({ error: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
} finally {
  await db.$disconnect();
}
