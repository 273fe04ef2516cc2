/**
 * Scheduler races: fast-check's scheduler picks the order of every store statement, every procedure effect
 * and the moment a lease expires, for 2–5 concurrent requests with the same Idempotency-Key — on an in-memory
 * model of the Postgres store (many runs) and on the real Prisma store (fewer runs). A CONTROL store with a
 * check-then-write claim shows the scheduler does find the double execution when the claim is not atomic.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import type { IdempotentRequest } from '../src/core/request.ts';
import { fingerprintRequest } from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';
import {
  createCheckThenWriteStore,
  createMemoryStore,
  type MemoryTx,
} from './support/properties-memory-store.ts';
import {
  type Mode,
  type RaceBackend,
  type RaceStats,
  raceScenario,
  runRace,
} from './support/properties-race.ts';

const options = resolveOptions({ leaseSeconds: 30, retentionSeconds: 3_600, lockTimeoutMs: 3_000 });
const procedure = 'orders.place';
const fingerprint = fingerprintRequest(procedure, { sku: 'A', quantity: 1 });

const MEMORY_RUNS = Number(process.env.IDEM_PROPERTY_RUNS ?? 400);
const PRISMA_RUNS = Number(process.env.IDEM_PROPERTY_DB_RUNS ?? 100);
const SEED = Number(process.env.IDEM_PROPERTY_SEED ?? 20_260_101);

function newRequest(scope = 'principal:1'): IdempotentRequest {
  return { scope, procedure, key: randomUUID(), fingerprint };
}

class Tally {
  runs = 0;
  steps = 0;
  effects = 0;
  takeovers = 0;
  conflicts = 0;
  leaseExpired = 0;
  doubleExecutions = 0;
  readonly interleavings = new Set<string>();
  add(stats: RaceStats) {
    this.runs += 1;
    this.steps += stats.steps;
    this.effects += stats.effects;
    this.takeovers += stats.takeovers;
    this.conflicts += stats.conflicts;
    if (stats.leaseExpired) this.leaseExpired += 1;
    if (stats.effects > 1 && !stats.leaseExpired) this.doubleExecutions += 1;
    this.interleavings.add(stats.interleaving);
  }
  print(label: string) {
    console.log(
      `[properties] ${label}: ${this.runs} runs, ${this.interleavings.size} distinct interleavings, ` +
        `${this.steps} scheduling decisions, ${this.doubleExecutions} double executions; ` +
        `${this.leaseExpired} runs with a lease expiry, ${this.takeovers} takeovers, ${this.conflicts} 409s`,
    );
  }
}

function memoryBackend(s: fc.Scheduler, mode: Mode): RaceBackend<MemoryTx> {
  const store = createMemoryStore({
    // A duplicate's wait for the row lock ends when the scheduler says so (SET LOCAL lock_timeout).
    lockTimeout: () => s.schedule(Promise.resolve('lock timeout'), 'lock timeout fires'),
  });
  const external: string[] = [];
  const request = newRequest();
  return {
    store,
    request,
    expireLease: async () => store.clock.advance(options.leaseSeconds + 1),
    effect: async (who, tx) => {
      if (mode === 'external') external.push(who);
      else store.recordEffect(who, tx);
    },
    effects: async () => (mode === 'external' ? external : [...store.committedEffects()]),
    storedRecord: () => store.find(request),
  };
}

describe.each<Mode>(['external', 'transactional'])(
  '%s mode, in-memory model of the Postgres store',
  (mode) => {
    it(`any interleaving of 2–5 requests with one key: one execution, one stored response, no 500`, async () => {
      const tally = new Tally();
      await fc.assert(
        fc.asyncProperty(fc.scheduler(), raceScenario(), async (s, scenario) => {
          const { violations, stats } = await runRace(s, scenario, memoryBackend(s, mode), mode, options);
          tally.add(stats);
          if (violations.length > 0) throw new Error(`${violations.join('\n')}\n${String(s)}`);
        }),
        { numRuns: MEMORY_RUNS, seed: SEED },
      );
      tally.print(`scheduler/${mode}/memory`);
      expect(tally.doubleExecutions).toBe(0);
      if (mode === 'external') expect(tally.takeovers).toBeGreaterThan(0); // the lease-expiry path is explored
    });
  },
);

describe('CONTROL: a check-then-write claim (find, then insert)', () => {
  it('the scheduler finds an interleaving that runs the effect twice', async () => {
    let failing: { clients: number; steps: number; effects: number; schedule: string } | null = null;
    const details = await fc.check(
      fc.asyncProperty(fc.scheduler(), raceScenario(), async (s, scenario) => {
        const backend = memoryBackend(s, 'external');
        const memory = backend.store as ReturnType<typeof createMemoryStore>;
        backend.store = createCheckThenWriteStore(memory, () =>
          s.schedule(Promise.resolve('gap'), 'between find and insert'),
        );
        const { violations, stats } = await runRace(
          s,
          { ...scenario, leaseExpires: false },
          backend,
          'external',
          options,
        );
        if (violations.length === 0) return true;
        failing = {
          clients: scenario.outcomes.length,
          steps: stats.steps,
          effects: stats.effects,
          schedule: String(s),
        };
        return false;
      }),
      { numRuns: MEMORY_RUNS, seed: SEED },
    );
    expect(details.failed).toBe(true);
    const found = failing as { clients: number; steps: number; effects: number; schedule: string } | null;
    console.log(
      `[properties] control: counterexample found after ${details.numRuns} runs, shrunk ${details.numShrinks} ` +
        `times to ${found?.clients} clients / ${found?.steps} scheduling decisions / ${found?.effects} executions` +
        `\n${found?.schedule}`,
    );
    expect(found?.effects).toBeGreaterThanOrEqual(2);
  });

  it('an unfenced completion (whoever holds the key now) is found completing a key taken over', async () => {
    const details = await fc.check(
      fc.asyncProperty(fc.scheduler(), raceScenario(), async (s, scenario) => {
        const backend = memoryBackend(s, 'external');
        const memory = backend.store;
        backend.store = {
          ...memory,
          async complete(key, _owner, response, tx) {
            const holder = (await memory.find(key))?.leaseOwner;
            return holder ? memory.complete(key, holder, response, tx) : false;
          },
        };
        const { violations } = await runRace(
          s,
          { ...scenario, leaseExpires: true },
          backend,
          'external',
          options,
        );
        return !violations.some((violation) =>
          violation.endsWith('completed after its lease was taken over'),
        );
      }),
      { numRuns: MEMORY_RUNS, seed: SEED },
    );
    console.log(`[properties] fencing control: counterexample found after ${details.numRuns} runs`);
    expect(details.failed).toBe(true);
  });
});

describe('real Prisma store (scheduled awaits around real statements)', () => {
  let db: Database;
  let store: ReturnType<typeof createPrismaIdempotencyStore<Database>>;
  const effectsTable = `properties_effects_${randomBytes(6).toString('hex')}`;

  beforeAll(async () => {
    db = await connectWithOwnTable(12);
    store = createPrismaIdempotencyStore(db);
    await db.$executeRawUnsafe(`create table "${effectsTable}" (scope text not null, who text not null)`);
  });
  afterAll(async () => {
    await db.$executeRawUnsafe(`drop table if exists "${effectsTable}"`);
    await db.$disconnect();
  });

  function prismaBackend(mode: Mode): RaceBackend<unknown> {
    const request = newRequest(uniqueScope());
    const external: string[] = [];
    type Tx = Parameters<Parameters<typeof store.transaction>[0]>[0];
    return {
      store: store as RaceBackend<unknown>['store'],
      request,
      expireLease: async () => {
        await db.$executeRawUnsafe(
          `update idempotency_keys set locked_until = now() - interval '1 second'
           where scope = $1 and procedure = $2 and key = $3 and state = 'processing'`,
          request.scope,
          request.procedure,
          request.key,
        );
      },
      effect: async (who, tx) => {
        if (mode === 'external') external.push(who);
        else
          await (tx as Tx).$executeRawUnsafe(
            `insert into "${effectsTable}" (scope, who) values ($1, $2)`,
            request.scope,
            who,
          );
      },
      effects: async () => {
        if (mode === 'external') return external;
        const rows = await db.$queryRawUnsafe<Array<{ who: string }>>(
          `select who from "${effectsTable}" where scope = $1`,
          request.scope,
        );
        return rows.map((row) => row.who);
      },
      storedRecord: () => store.find(request),
    };
  }

  it.each<Mode>(['external', 'transactional'])(
    '%s: any scheduled interleaving of 2–4 requests: one execution, one stored response, no 500',
    async (mode) => {
      const tally = new Tally();
      await fc.assert(
        fc.asyncProperty(fc.scheduler(), raceScenario(4), async (s, scenario) => {
          const { violations, stats } = await runRace(s, scenario, prismaBackend(mode), mode, options);
          tally.add(stats);
          if (violations.length > 0) throw new Error(`${violations.join('\n')}\n${String(s)}`);
        }),
        { numRuns: PRISMA_RUNS, seed: SEED },
      );
      tally.print(`scheduler/${mode}/prisma`);
      expect(tally.doubleExecutions).toBe(0);
    },
    60_000,
  );
});
