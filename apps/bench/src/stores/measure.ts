/**
 * The stores bench's measurements, through a tiny tRPC app per store (the adapter's own claim → run → complete
 * path, called in-process with `createCaller`, no HTTP) whose procedures do nothing: the figures are the store's
 * cost, plus the adapter's, which is the same for every store.
 */
import { randomUUID } from 'node:crypto';
import { createIdempotency } from '@idem/idempotency/trpc';
import { initTRPC, TRPCError } from '@trpc/server';
import { type LatencySummary, summarize } from '../storage/latency.ts';
import type { StoreUnderTest } from './store-under-test.ts';

interface Ctx {
  headers: Headers;
  resHeaders: Headers;
  principal: string;
}

export interface StoreFigures {
  name: string;
  durability: string;
  /** A new key, external mode: claim (committed) → procedure → complete. */
  firstExternal: LatencySummary;
  /** A new key, transactional mode: claim + procedure + complete in one transaction. */
  firstTransactional: LatencySummary;
  /** A duplicate of a completed key: the stored response. */
  replay: LatencySummary;
  /** 50 requests with one key at once, the procedure taking `burstProcedureMs`; 409s retried after 20 ms. */
  burst: Record<
    'external' | 'transactional',
    { executions: number; wallMs: number; conflicts: number; errors: number }
  >;
  /** New keys, external mode, from `connections` concurrent callers on a pool of as many connections. */
  throughput: { connections: number; seconds: number; perSecond: number };
}

export interface MeasureSettings {
  samples: number;
  burst: number;
  burstProcedureMs: number;
  connections: number;
  throughputSeconds: number;
  /** How many turns the stores take at each figure. */
  rounds: number;
}

function app(under: StoreUnderTest, procedureMs: () => number, executions: { count: number }) {
  const t = initTRPC.context<Ctx>().create({ isDev: false });
  const idempotency = createIdempotency<Ctx, unknown>({
    store: under.store,
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
  return (key: string, principal: string) => {
    const headers = new Headers({ 'idempotency-key': key });
    return createCaller({ headers, resHeaders: new Headers(), principal });
  };
}

/** One store's app: its caller, its execution counter, and the knob for its procedure's duration. */
export interface StoreApp {
  under: StoreUnderTest;
  call: ReturnType<typeof app>;
  executions: { count: number };
  setProcedureMs(ms: number): void;
  principal: string;
}

export async function prepareStore(under: StoreUnderTest): Promise<StoreApp> {
  let procedureMs = 0;
  const executions = { count: 0 };
  const call = app(under, () => procedureMs, executions);
  const principal = `bench:${randomUUID()}`;
  // Warm-up: connections opened, statements planned.
  for (let index = 0; index < 50; index += 1) await call(randomUUID(), principal).external();
  return {
    under,
    call,
    executions,
    principal,
    setProcedureMs: (ms) => {
      procedureMs = ms;
    },
  };
}

async function timed(count: number, call: () => Promise<unknown>): Promise<number[]> {
  const latencies: number[] = [];
  for (let index = 0; index < count; index += 1) {
    const started = performance.now();
    await call();
    latencies.push(performance.now() - started);
  }
  return latencies;
}

/**
 * The stores take turns: each figure is measured in `rounds` rounds, and in every round each store runs its
 * share back to back with the others, so a change in the machine's load falls on all of them alike.
 */
export async function measureStores(apps: StoreApp[], settings: MeasureSettings): Promise<StoreFigures[]> {
  const rounds = settings.rounds;
  const perRound = Math.max(1, Math.ceil(settings.samples / rounds));
  const latencies = apps.map(() => ({
    firstExternal: [] as number[],
    firstTransactional: [] as number[],
    replay: [] as number[],
  }));
  const replayKeys = await Promise.all(
    apps.map(async (store) => {
      const key = randomUUID();
      await store.call(key, store.principal).external();
      return key;
    }),
  );
  for (let round = 0; round < rounds; round += 1) {
    for (const [index, store] of apps.entries()) {
      const into = latencies[index];
      if (!into) continue;
      into.firstExternal.push(
        ...(await timed(perRound, () => store.call(randomUUID(), store.principal).external())),
      );
      into.firstTransactional.push(
        ...(await timed(perRound, () => store.call(randomUUID(), store.principal).transactional())),
      );
      into.replay.push(
        ...(await timed(perRound, () => store.call(replayKeys[index] ?? '', store.principal).external())),
      );
    }
  }

  const bursts = apps.map(() => ({}) as StoreFigures['burst']);
  for (const mode of ['external', 'transactional'] as const)
    for (const [index, store] of apps.entries()) {
      const figures = bursts[index];
      if (figures) figures[mode] = await burst(store, mode, settings);
    }

  const completed = apps.map(() => 0);
  const elapsed = apps.map(() => 0);
  const slice = (settings.throughputSeconds * 1000) / rounds;
  for (let round = 0; round < rounds; round += 1)
    for (const [index, store] of apps.entries()) {
      const started = performance.now();
      const deadline = started + slice;
      await Promise.all(
        Array.from({ length: settings.connections }, async () => {
          while (performance.now() < deadline) {
            await store.call(randomUUID(), store.principal).external();
            completed[index] = (completed[index] ?? 0) + 1;
          }
        }),
      );
      elapsed[index] = (elapsed[index] ?? 0) + (performance.now() - started) / 1000;
    }

  return apps.map((store, index) => {
    const samples = latencies[index] ?? { firstExternal: [], firstTransactional: [], replay: [] };
    const seconds = elapsed[index] ?? 0;
    return {
      name: store.under.name,
      durability: store.under.durability,
      firstExternal: summarize(samples.firstExternal),
      firstTransactional: summarize(samples.firstTransactional),
      replay: summarize(samples.replay),
      burst: bursts[index] ?? ({} as StoreFigures['burst']),
      throughput: {
        connections: settings.connections,
        seconds,
        perSecond: (completed[index] ?? 0) / seconds,
      },
    };
  });
}

/** `settings.burst` requests with one new key at once; a 409 is retried after 20 ms, as a client would. */
async function burst(store: StoreApp, mode: 'external' | 'transactional', settings: MeasureSettings) {
  store.setProcedureMs(settings.burstProcedureMs);
  const key = randomUUID();
  const before = store.executions.count;
  let conflicts = 0;
  let errors = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: settings.burst }, async () => {
      for (let attempt = 0; attempt < 200; attempt += 1) {
        try {
          await store.call(key, store.principal)[mode]();
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
  store.setProcedureMs(0);
  return {
    executions: store.executions.count - before,
    wallMs: performance.now() - started,
    conflicts,
    errors,
  };
}
