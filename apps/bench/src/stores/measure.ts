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

async function timed(count: number, call: (index: number) => Promise<unknown>): Promise<LatencySummary> {
  const latencies: number[] = [];
  for (let index = 0; index < count; index += 1) {
    const started = performance.now();
    await call(index);
    latencies.push(performance.now() - started);
  }
  return summarize(latencies);
}

export async function measureStore(under: StoreUnderTest, settings: MeasureSettings): Promise<StoreFigures> {
  let procedureMs = 0;
  const executions = { count: 0 };
  const caller = app(under, () => procedureMs, executions);
  const principal = `bench:${randomUUID()}`;

  // Warm-up: connections opened, statements planned.
  for (let index = 0; index < 50; index += 1) await caller(randomUUID(), principal).external();

  const firstExternal = await timed(settings.samples, () => caller(randomUUID(), principal).external());
  const firstTransactional = await timed(settings.samples, () =>
    caller(randomUUID(), principal).transactional(),
  );
  const replayKey = randomUUID();
  await caller(replayKey, principal).external();
  const replay = await timed(settings.samples, () => caller(replayKey, principal).external());

  const burst = {} as StoreFigures['burst'];
  for (const mode of ['external', 'transactional'] as const) {
    procedureMs = settings.burstProcedureMs;
    const key = randomUUID();
    const before = executions.count;
    let conflicts = 0;
    let errors = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: settings.burst }, async () => {
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
  const deadline = performance.now() + settings.throughputSeconds * 1000;
  const throughputStarted = performance.now();
  await Promise.all(
    Array.from({ length: settings.connections }, async () => {
      while (performance.now() < deadline) {
        await caller(randomUUID(), principal).external();
        completed += 1;
      }
    }),
  );
  const seconds = (performance.now() - throughputStarted) / 1000;

  return {
    name: under.name,
    durability: under.durability,
    firstExternal,
    firstTransactional,
    replay,
    burst,
    throughput: { connections: settings.connections, seconds, perSecond: completed / seconds },
  };
}
