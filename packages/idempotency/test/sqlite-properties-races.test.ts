/**
 * Scheduler races on the real SQLite store: fast-check's scheduler orders every store statement, every effect
 * and the moment a lease expires, for 2–4 concurrent requests with one Idempotency-Key (the same properties as
 * properties-races.test.ts on Postgres). CONTROL: a check-then-write claim on the same SQLite table (read the
 * key, then write it) lets the scheduler find a double execution.
 */
import { randomUUID } from 'node:crypto';
import type { SqliteDatabase } from '@idem/db-sqlite';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import type { IdempotentRequest } from '../src/core/request.ts';
import { fingerprintRequest } from '../src/index.ts';
import { createSqliteIdempotencyStore } from '../src/sqlite/index.ts';
import { uniqueScope } from './support/db.ts';
import { type Mode, type RaceBackend, raceScenario, runRace } from './support/properties-race.ts';
import { connectSqlite } from './support/sqlite-db.ts';

const options = resolveOptions({ leaseSeconds: 30, retentionSeconds: 3_600, lockTimeoutMs: 3_000 });
const procedure = 'orders.place';
const fingerprint = fingerprintRequest(procedure, { sku: 'A', quantity: 1 });
const RUNS = Number(process.env.IDEM_PROPERTY_DB_RUNS ?? 100);
const SEED = Number(process.env.IDEM_PROPERTY_SEED ?? 20_260_101);

let db: SqliteDatabase;
let store: ReturnType<typeof createSqliteIdempotencyStore<SqliteDatabase>>;
type Tx = Parameters<Parameters<typeof store.transaction>[0]>[0];

beforeAll(async () => {
  ({ db } = await connectSqlite());
  store = createSqliteIdempotencyStore(db);
  await db.$executeRawUnsafe('create table effects (scope text not null, who text not null)');
});
afterAll(async () => {
  await db.$disconnect();
});

/** Test-side SQL in a transaction of its own: a bare statement would join whichever transaction is open. */
const exclusive = <T>(fn: (tx: Tx) => Promise<T>) => db.$transaction(fn);

function sqliteBackend(mode: Mode, claimStore = store): RaceBackend<unknown> {
  const request: IdempotentRequest = { scope: uniqueScope(), procedure, key: randomUUID(), fingerprint };
  const external: string[] = [];
  return {
    store: claimStore as RaceBackend<unknown>['store'],
    request,
    expireLease: async () => {
      await exclusive((tx) =>
        tx.$executeRawUnsafe(
          `update idempotency_keys set locked_until = strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '-1 seconds')
           where scope = ? and procedure = ? and key = ? and state = 'processing'`,
          request.scope,
          request.procedure,
          request.key,
        ),
      );
    },
    effect: async (who, tx) => {
      if (mode === 'external') external.push(who);
      else
        await (tx as Tx).$executeRawUnsafe(
          'insert into effects (scope, who) values (?, ?)',
          request.scope,
          who,
        );
    },
    effects: async () => {
      if (mode === 'external') return external;
      const rows = await exclusive((tx) =>
        tx.$queryRawUnsafe<Array<{ who: string }>>('select who from effects where scope = ?', request.scope),
      );
      return rows.map((row) => row.who);
    },
    storedRecord: () => store.find(request),
  };
}

describe('real SQLite store (scheduled awaits around real statements)', () => {
  it.each<Mode>(['external', 'transactional'])(
    '%s: any scheduled interleaving of 2–4 requests: one execution, one stored response, no 500',
    async (mode) => {
      let runs = 0;
      let takeovers = 0;
      let doubleExecutions = 0;
      await fc.assert(
        fc.asyncProperty(fc.scheduler(), raceScenario(4), async (s, scenario) => {
          const { violations, stats } = await runRace(s, scenario, sqliteBackend(mode), mode, options);
          runs += 1;
          takeovers += stats.takeovers;
          if (stats.effects > 1 && !stats.leaseExpired) doubleExecutions += 1;
          if (violations.length > 0) throw new Error(`${violations.join('\n')}\n${String(s)}`);
        }),
        { numRuns: RUNS, seed: SEED },
      );
      console.log(
        `[properties] scheduler/${mode}/sqlite: ${runs} runs, ${takeovers} takeovers, ${doubleExecutions} double executions`,
      );
      expect(runs).toBe(RUNS);
      expect(doubleExecutions).toBe(0);
      if (mode === 'external') expect(takeovers).toBeGreaterThan(0); // the lease-expiry path was explored
    },
    120_000,
  );
});

describe('CONTROL: a check-then-write claim on the same SQLite table', () => {
  it('the scheduler finds an interleaving that runs the effect twice', async () => {
    let effectsSeen = 0;
    const details = await fc.check(
      fc.asyncProperty(fc.scheduler(), raceScenario(4), async (s, scenario) => {
        const checkThenWrite: typeof store = {
          ...store,
          async claim(request) {
            const existing = await store.find(request);
            if (existing) return { claimed: false, record: existing };
            await s.schedule(Promise.resolve('gap'), 'between find and insert');
            await exclusive((tx) =>
              tx.$executeRawUnsafe(
                `insert or replace into idempotency_keys
                   (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at)
                 values (?, ?, ?, ?, 'processing', ?, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '+30 seconds'),
                         strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '+3600 seconds'))`,
                request.scope,
                request.procedure,
                request.key,
                request.fingerprint,
                request.owner,
              ),
            );
            return { claimed: true, takeover: false };
          },
        };
        const backend = sqliteBackend('external', checkThenWrite);
        const { violations, stats } = await runRace(
          s,
          { ...scenario, leaseExpires: false },
          backend,
          'external',
          options,
        );
        effectsSeen = Math.max(effectsSeen, stats.effects);
        return violations.length === 0;
      }),
      { numRuns: RUNS, seed: SEED },
    );
    expect(details.failed).toBe(true);
    expect(effectsSeen).toBeGreaterThanOrEqual(2);
  }, 120_000);
});
