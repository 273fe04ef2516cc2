/**
 * `pnpm bench:sqlite`: the SQLite store beside the Postgres store, in one run, through a tiny tRPC app per store
 * (the adapter's own claim → run → complete path, called in-process with `createCaller`; procedures that do
 * nothing, so the figures are the store's cost plus the adapter's, the same for both): a new key's claim +
 * complete (external, transactional), a replay, a 50-request burst on one key (executions and wall time; the
 * procedure takes 50 ms), and new keys per second from 8 concurrent callers. Prints a markdown table
 * (docs/BENCHMARKS.md, "Stores: SQLite", holds one run's). A stand-in until the stores runner (main.ts) lists
 * `sqlite.ts` beside the other stores.
 *
 * Knobs (environment): DATABASE_URL (the Postgres server), BENCH_STORE_SAMPLES (500), BENCH_STORE_SECONDS (5).
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient } from '@idem/db';
import type { IdempotencyStore } from '@idem/idempotency';
import { createPrismaIdempotencyStore, idempotencyKeysSchema } from '@idem/idempotency/prisma';
import { createIdempotency } from '@idem/idempotency/trpc';
import { initTRPC, TRPCError } from '@trpc/server';
import {
  createDatabase,
  dropDatabase,
  messageOf,
  scratchDatabaseName,
  useExternalServer,
} from '../repository.ts';
import { formatMs, type LatencySummary, summarize } from '../storage/latency.ts';
import { sqliteStore } from './sqlite.ts';
import type { StoreFactory, StoreUnderTest } from './store-under-test.ts';

const SAMPLES = Number(process.env.BENCH_STORE_SAMPLES ?? 500);
const SECONDS = Number(process.env.BENCH_STORE_SECONDS ?? 5);
const BURST = 50;
const BURST_PROCEDURE_MS = 50;
const CALLERS = 8;

/** The Postgres baseline (the same scratch-database setup as the stores runner's postgres.ts). */
const postgresBaseline: StoreFactory = async (connections) => {
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const name = scratchDatabaseName('idem_bench_sqlite');
  const url = await createDatabase(server.adminUrl, name);
  const db = createPrismaClient({ connectionString: url, max: connections });
  for (const statement of idempotencyKeysSchema().statements) await db.$executeRawUnsafe(statement);
  const [settings] = await db.$queryRawUnsafe<Array<{ version: string; commit: string }>>(
    `select current_setting('server_version') as version, current_setting('synchronous_commit') as commit`,
  );
  return {
    name: `PostgreSQL ${settings?.version.split(' ')[0] ?? '?'}`,
    durability: `synchronous_commit=${settings?.commit}, pool of ${connections}`,
    store: createPrismaIdempotencyStore(db) as IdempotencyStore<unknown>,
    async close() {
      await db.$disconnect();
      await dropDatabase(server.adminUrl, name);
    },
  };
};

interface Ctx {
  headers: Headers;
  resHeaders: Headers;
  principal: string;
}

function app(store: IdempotencyStore<unknown>, procedureMs: () => number, executions: { count: number }) {
  const t = initTRPC.context<Ctx>().create({ isDev: false });
  const idempotency = createIdempotency<Ctx, unknown>({
    store,
    getScope: (ctx) => ctx.principal,
    getRequestHeaders: (ctx) => ctx.headers,
    getResponseHeaders: (ctx) => ctx.resHeaders,
    defaults: { maxInFlightPerScope: Number.POSITIVE_INFINITY },
  });
  const run = async () => {
    executions.count += 1;
    const ms = procedureMs();
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    return { ok: true };
  };
  const router = t.router({
    external: t.procedure.concat(idempotency.external()).mutation(run),
    transactional: t.procedure.concat(idempotency.transactional()).mutation(run),
  });
  const createCaller = t.createCallerFactory(router);
  return (key: string, principal: string) =>
    createCaller({ headers: new Headers({ 'idempotency-key': key }), resHeaders: new Headers(), principal });
}

async function timed(count: number, call: () => Promise<unknown>): Promise<LatencySummary> {
  const latencies: number[] = [];
  for (let index = 0; index < count; index += 1) {
    const started = performance.now();
    await call();
    latencies.push(performance.now() - started);
  }
  return summarize(latencies);
}

interface Figures {
  name: string;
  durability: string;
  external: LatencySummary;
  transactional: LatencySummary;
  replay: LatencySummary;
  burst: Record<
    'external' | 'transactional',
    { executions: number; wallMs: number; conflicts: number; errors: number }
  >;
  perSecond: number;
}

async function measure(under: StoreUnderTest): Promise<Figures> {
  let procedureMs = 0;
  const executions = { count: 0 };
  const caller = app(under.store, () => procedureMs, executions);
  const principal = `bench:${randomUUID()}`;
  for (let index = 0; index < 50; index += 1) await caller(randomUUID(), principal).external();
  const external = await timed(SAMPLES, () => caller(randomUUID(), principal).external());
  const transactional = await timed(SAMPLES, () => caller(randomUUID(), principal).transactional());
  const replayKey = randomUUID();
  await caller(replayKey, principal).external();
  const replay = await timed(SAMPLES, () => caller(replayKey, principal).external());

  const burst = {} as Figures['burst'];
  for (const mode of ['external', 'transactional'] as const) {
    procedureMs = BURST_PROCEDURE_MS;
    const key = randomUUID();
    const before = executions.count;
    let conflicts = 0;
    let errors = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: BURST }, async () => {
        for (let attempt = 0; attempt < 200; attempt += 1) {
          try {
            await caller(key, principal)[mode]();
            return;
          } catch (error) {
            if (!(error instanceof TRPCError && error.code === 'CONFLICT')) {
              errors += 1;
              return;
            }
            conflicts += 1;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        }
        errors += 1;
      }),
    );
    burst[mode] = {
      executions: executions.count - before,
      wallMs: performance.now() - started,
      conflicts,
      errors,
    };
    procedureMs = 0;
  }

  let completed = 0;
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (performance.now() < deadline) {
        await caller(randomUUID(), principal).external();
        completed += 1;
      }
    }),
  );
  const perSecond = completed / ((performance.now() - started) / 1000);
  return {
    name: under.name,
    durability: under.durability,
    external,
    transactional,
    replay,
    burst,
    perSecond,
  };
}

function table(results: Figures[]): string {
  const base = results[0];
  const ratio = (value: number, baseline: number | undefined) =>
    baseline && results.length > 1 ? ` (${(value / baseline).toFixed(2)}×)` : '';
  const burst = (figures: Figures, mode: 'external' | 'transactional') => {
    const b = figures.burst[mode];
    return `${b.executions} exec, ${b.wallMs.toFixed(0)} ms, ${b.conflicts} × 409${b.errors ? `, ${b.errors} errors` : ''}`;
  };
  return [
    `| store | new key, external: p50 ms | new key, transactional: p50 ms | replay: p50 ms | ${BURST} at once on one key, external | same, transactional | new keys/s, ${CALLERS} callers |`,
    '|---|---|---|---|---|---|---|',
    ...results.map(
      (f) =>
        `| ${f.name} | ${formatMs(f.external.p50)}${ratio(f.external.p50, base?.external.p50)} ` +
        `| ${formatMs(f.transactional.p50)}${ratio(f.transactional.p50, base?.transactional.p50)} ` +
        `| ${formatMs(f.replay.p50)}${ratio(f.replay.p50, base?.replay.p50)} ` +
        `| ${burst(f, 'external')} | ${burst(f, 'transactional')} ` +
        `| ${f.perSecond.toFixed(0)}${ratio(f.perSecond, base?.perSecond)} |`,
    ),
    '',
    ...results.map((f) => `- ${f.name}: ${f.durability}`),
    `- ${SAMPLES} sequential samples per p50; burst procedure ${BURST_PROCEDURE_MS} ms, 409s retried after 20 ms; throughput over ${SECONDS} s. Ratios against the first row.`,
  ].join('\n');
}

try {
  const results: Figures[] = [];
  for (const factory of [postgresBaseline, sqliteStore]) {
    const under = await factory(CALLERS);
    try {
      console.log(`[bench:sqlite] ${under.name} (${under.durability})`);
      results.push(await measure(under));
    } finally {
      await under.close();
    }
  }
  console.log(`\n${table(results)}\n`);
  console.log(JSON.stringify(results));
} catch (error) {
  console.error(`[bench:sqlite] ${messageOf(error)}`);
  process.exitCode = 1;
}
