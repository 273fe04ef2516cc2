/**
 * One OS process of the multi-process MariaDB test (mariadb-processes.test.ts): connects, says `ready`, waits for
 * `go` on stdin (so every process starts at once, however long its start-up took), then runs every key of the list once through the core handler on the MariaDB store (retrying 409s like a
 * client would), the procedure's effect being one row in `effects`. Prints a JSON summary on its last line.
 *
 * CLAIM=check-then-write swaps in the CONTROL claim (test side only): find the row, wait GAP_MS, then overwrite it
 * with REPLACE — a read-then-write decision instead of the engine's atomic INSERT IGNORE.
 */
import { randomUUID } from 'node:crypto';
import { createMariadbPrismaClient } from '@idem/mariadb-test-db';
import { resolveOptions } from '../../src/core/config.ts';
import { handleExternal } from '../../src/core/external.ts';
import type { IdempotencyStore } from '../../src/core/store.ts';
import { handleTransactional } from '../../src/core/transactional.ts';
import { fingerprintRequest, IdempotencyError } from '../../src/index.ts';
import { createMariadbIdempotencyStore } from '../../src/mariadb/index.ts';

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const mode = env('MODE') as 'external' | 'transactional';
const keys = env('KEYS').split(',');
const scope = env('SCOPE');
const gapMs = Number(process.env.GAP_MS ?? 50);

const db = createMariadbPrismaClient(env('MARIADB_URL'), 4);
const real = createMariadbIdempotencyStore(db);
type Tx = Parameters<Parameters<typeof real.transaction>[0]>[0];

const store: IdempotencyStore<Tx> =
  process.env.CLAIM === 'check-then-write'
    ? {
        ...real,
        async claim(request) {
          const existing = await real.find(request);
          if (existing) return { claimed: false, record: existing };
          await new Promise((resolve) => setTimeout(resolve, gapMs));
          await db.$executeRawUnsafe(
            `REPLACE INTO idempotency_keys (scope, \`procedure\`, \`key\`, fingerprint, state, lease_owner, locked_until,
               created_at, expires_at)
             VALUES (?, ?, ?, ?, 'processing', ?, TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)), UTC_TIMESTAMP(6),
               TIMESTAMPADD(SECOND, ?, UTC_TIMESTAMP(6)))`,
            request.scope,
            request.procedure,
            request.key,
            request.fingerprint,
            request.owner,
            request.leaseSeconds,
            request.retentionSeconds,
          );
          return { claimed: true, takeover: false };
        },
      }
    : real;

const options = resolveOptions({ leaseSeconds: 30, retentionSeconds: 3_600, lockTimeoutMs: 5_000 });
const procedure = 'orders.place';
const tally = { executed: 0, replayed: 0, conflicts: 0 };

async function effect(key: string, on: Pick<typeof db, '$executeRawUnsafe'>) {
  await on.$executeRawUnsafe('INSERT INTO effects (`key`, pid) VALUES (?, ?)', key, process.pid);
  return { kind: 'output' as const, httpStatus: 200, body: JSON.stringify({ json: { pid: process.pid } }) };
}

async function once(key: string) {
  const request = { scope, procedure, key, fingerprint: fingerprintRequest(procedure, { key }) };
  for (;;) {
    try {
      const handled =
        mode === 'external'
          ? await handleExternal(store as IdempotencyStore<unknown>, options, request, async () => {
              const response = await effect(key, db);
              return { result: null, response };
            })
          : await handleTransactional(store, options, request, async (tx) => {
              const response = await effect(key, tx);
              return { result: null, response };
            });
      if (handled.kind === 'replayed') tally.replayed += 1;
      else tally.executed += 1;
      return;
    } catch (error) {
      if (!(error instanceof IdempotencyError) || error.httpStatus !== 409) throw error;
      tally.conflicts += 1;
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20));
    }
  }
}

await db.$queryRawUnsafe('SELECT 1');
console.log('ready');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.pause();
// Each process walks the keys in its own order, several at a time, so the same key meets from every side.
const order = [...keys].sort(() => Math.random() - 0.5);
await Promise.all(
  Array.from({ length: 4 }, async () => {
    for (let key = order.pop(); key !== undefined; key = order.pop()) await once(key);
  }),
);
await db.$disconnect();
console.log(JSON.stringify({ pid: process.pid, id: randomUUID(), ...tally }));
