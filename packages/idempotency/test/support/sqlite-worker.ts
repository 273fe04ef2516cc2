/**
 * One OS process of the SQLite multi-process tests (run with `node --import tsx`). Its first argument says what
 * it does:
 * - `requests <file> <mode> <scope> <keys> <startAt>`: sends every key once through the handler (`external`,
 *   `transactional`, or `unprotected`: the effect with no claim at all, the control), retrying 409s, each effect
 *   an `effects` row; at `startAt` (epoch ms), so the processes race. Prints a JSON summary.
 * - `hold-write-lock <file> <holdMs>`: opens a write transaction, prints `locked`, commits after `holdMs`, prints
 *   `committed`.
 */
import { createSqlitePrismaClient } from '@idem/db-sqlite';
import { resolveOptions } from '../../src/core/config.ts';
import { handleExternal } from '../../src/core/external.ts';
import { handleTransactional } from '../../src/core/transactional.ts';
import { fingerprintRequest, IdempotencyError } from '../../src/index.ts';
import { createSqliteIdempotencyStore } from '../../src/sqlite/index.ts';

const [command, file, ...rest] = process.argv.slice(2);
if (!file) throw new Error('usage: sqlite-worker.ts <command> <file> …');
const db = createSqlitePrismaClient({ file, busyTimeoutMs: 10_000 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

if (command === 'hold-write-lock') {
  const holdMs = Number(rest[0] ?? 500);
  await db.$transaction(
    async (tx) => {
      await tx.$executeRawUnsafe(
        `insert into effects (scope, key, pid) values ('lock-holder', 'x', ?)`,
        process.pid,
      );
      console.log('locked');
      await sleep(holdMs);
    },
    { timeout: holdMs + 10_000 },
  );
  console.log('committed');
} else if (command === 'requests') {
  const [mode, scope, keyList, startAt] = rest;
  const keys = (keyList ?? '').split(',');
  const store = createSqliteIdempotencyStore(db);
  const options = resolveOptions({ leaseSeconds: 30, lockTimeoutMs: 10_000, maxInFlightPerScope: 1_000 });
  const summary = { pid: process.pid, executed: 0, replayed: 0, conflicts: 0, errors: [] as string[] };
  const procedure = 'orders.place';
  const effect = (key: string, on: { $executeRawUnsafe: typeof db.$executeRawUnsafe }) =>
    on.$executeRawUnsafe('insert into effects (scope, key, pid) values (?, ?, ?)', scope, key, process.pid);
  const outcome = { kind: 'output' as const, httpStatus: 200, body: '{"json":"ok"}' };
  await sleep(Math.max(0, Number(startAt) - Date.now()));
  await Promise.all(
    keys.map(async (key) => {
      const request = {
        scope: scope ?? '',
        procedure,
        key,
        fingerprint: fingerprintRequest(procedure, { key }),
      };
      for (let attempt = 0; attempt < 50; attempt += 1) {
        try {
          if (mode === 'unprotected') {
            await db.$transaction((tx) => effect(key, tx));
            summary.executed += 1;
            return;
          }
          const handled =
            mode === 'transactional'
              ? await handleTransactional(store, options, request, async (tx) => {
                  await effect(key, tx);
                  return { result: outcome, response: outcome };
                })
              : await handleExternal(store, options, request, async () => {
                  await db.$transaction((tx) => effect(key, tx));
                  return { result: outcome, response: outcome };
                });
          if (handled.kind === 'executed') summary.executed += 1;
          if (handled.kind === 'replayed') summary.replayed += 1;
          return;
        } catch (error) {
          if (error instanceof IdempotencyError && error.httpStatus === 409) {
            summary.conflicts += 1;
            await sleep(20 + Math.random() * 30);
            continue;
          }
          summary.errors.push(String(error));
          return;
        }
      }
      summary.errors.push(`${key}: still 409 after 50 attempts`);
    }),
  );
  console.log(JSON.stringify(summary));
} else throw new Error(`unknown command ${command}`);
await db.$disconnect();
