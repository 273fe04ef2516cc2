/**
 * The conformance kit (`@idem/idempotency/testing`) against small tRPC apps of this file's own, served over real
 * HTTP by tRPC's standalone adapter, on the run's Postgres: a correct app passes every check in both modes, and
 * each deliberately broken app FAILS the check written for its fault (the controls: no check passes by default).
 */
import type { AddressInfo } from 'node:net';
import type { Database } from '@idem/db';
import { initTRPC, TRPCError } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../src/prisma/index.ts';
import {
  type ConformanceCheckId,
  type ConformanceCheckResult,
  type ConformanceReport,
  type ConformanceTarget,
  createInProcessGate,
  type ExecutionGate,
  formatConformanceReport,
  registerIdempotencyConformance,
  runIdempotencyConformance,
} from '../src/testing/index.ts';
import { createIdempotency } from '../src/trpc/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';

let db: Database;
const servers: Array<{ close(): Promise<void> }> = [];
beforeAll(async () => {
  db = await connectWithOwnTable(12);
});
afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  await db.$disconnect();
});

/** Small, so the 429 check needs few requests. */
const IN_FLIGHT_CAP = 4;

type Mode = 'external' | 'transactional';
/** One fault per control app; a correct app has none. */
type Fault =
  | 'no-middleware'
  | 'no-response-headers'
  | 'not-batch-aware'
  | 'one-scope-for-everyone'
  | 'errors-not-stored'
  | 'slow-seam-does-nothing';

interface AppContext {
  headers: Headers;
  resHeaders: Headers;
  principal: string | null;
  batched: boolean;
}

const orderInput = z.object({ sku: z.string().min(1), quantity: z.number().int().positive() });
type Order = z.infer<typeof orderInput>;

/** An app with one idempotent mutation, `shop.placeOrder`, and the knobs the kit's optional checks use. */
async function startApp(mode: Mode, fault?: Fault) {
  const t = initTRPC.context<AppContext>().create({ transformer: superjson, isDev: false });
  const store = createPrismaIdempotencyStore(db);
  const idempotency = createIdempotency<AppContext, PrismaTransactionLike<Database>>({
    store,
    transformer: superjson,
    getScope: (ctx) =>
      fault === 'one-scope-for-everyone' && ctx.principal ? 'test:everyone' : ctx.principal,
    getRequestHeaders: (ctx) => ctx.headers,
    ...(fault === 'no-response-headers' ? {} : { getResponseHeaders: (ctx: AppContext) => ctx.resHeaders }),
    ...(fault === 'not-batch-aware' ? {} : { isBatched: (ctx: AppContext) => ctx.batched }),
    defaults: {
      maxInFlightPerScope: IN_FLIGHT_CAP,
      ...(fault === 'errors-not-stored' ? { storedErrorCodes: [] } : {}),
    },
  });
  const knobs = { executions: 0, gate: createInProcessGate(), failing: false };

  async function placeOrder(input: Order) {
    knobs.executions += 1;
    await knobs.gate.pass();
    if (knobs.failing) throw new Error('simulated outage');
    if (input.sku === 'declined') throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Declined' });
    return { orderNumber: knobs.executions, total: 42n * BigInt(input.quantity), at: new Date() };
  }
  const base =
    fault === 'no-middleware'
      ? t.procedure
      : mode === 'external'
        ? t.procedure.concat(idempotency.external())
        : t.procedure.concat(idempotency.transactional());
  const router = t.router({
    shop: t.router({ placeOrder: base.input(orderInput).mutation(({ input }) => placeOrder(input)) }),
  });

  const server = createHTTPServer({
    router,
    createContext: ({ req, info }) => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) {
        for (const item of Array.isArray(value) ? value : value === undefined ? [] : [value])
          headers.append(name, item);
      }
      return {
        headers,
        resHeaders: new Headers(),
        principal: headers.get('x-principal'),
        batched: info.calls.length > 1,
      };
    },
    // The node adapter has no resHeaders: the middleware's headers travel through responseMeta.
    responseMeta: ({ ctx }) => ({ headers: ctx?.resHeaders }),
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  servers.push({ close });
  const { port } = server.address() as AddressInfo;

  const scopes = [uniqueScope(), uniqueScope()] as const;
  const target: ConformanceTarget<Order> = {
    url: `http://127.0.0.1:${port}`,
    procedure: 'shop.placeOrder',
    input: () => ({ sku: 'book', quantity: 1 }),
    differentInput: () => ({ sku: 'book', quantity: 2 }),
    invalidInput: () => ({ sku: '', quantity: -1 }),
    serialize: superjson.serialize,
    principals: [
      { headers: { 'x-principal': scopes[0] }, scope: scopes[0] },
      { headers: { 'x-principal': scopes[1] }, scope: scopes[1] },
    ],
    unauthenticatedHeaders: {},
    executions: async () => knobs.executions,
    businessErrorInput: () => ({ sku: 'declined', quantity: 1 }),
    // The control's seam is the latency kind (withSlowExecution) that forgets to slow anything down.
    ...(fault === 'slow-seam-does-nothing'
      ? { withSlowExecution: <T>(run: () => Promise<T>) => run() }
      : { withHeldExecutions: <T>(run: (gate: ExecutionGate) => Promise<T>) => knobs.gate.holdWhile(run) }),
    async withTransientFailure(run) {
      knobs.failing = true;
      try {
        return await run();
      } finally {
        knobs.failing = false;
      }
    },
    ...(mode === 'external' ? { inFlightCap: IN_FLIGHT_CAP } : {}),
    store,
  };
  return { target, knobs };
}

function resultOf(report: ConformanceReport, id: ConformanceCheckId) {
  const result = report.results.find((candidate) => candidate.id === id);
  if (!result) throw new Error(`${id} did not run:\n${formatConformanceReport(report)}`);
  return result;
}

describe.each(['external', 'transactional'] as const)('a correct app, %s mode', (mode) => {
  it('passes every check the kit has for it', async () => {
    const { target } = await startApp(mode);
    const report = await runIdempotencyConformance(target, { concurrency: 12 });
    console.log(formatConformanceReport(report));
    expect(report.results.filter((result) => !result.passed)).toEqual([]);
    expect(report.passed).toBe(true);
    // External mode supports every check; transactional claims are invisible to the in-flight count (no 429).
    expect(report.notCovered.map((skipped) => skipped.id)).toEqual(
      mode === 'external' ? [] : ['in-flight-cap'],
    );
    expect(report.results).toHaveLength(mode === 'external' ? 17 : 16);
  }, 60_000);
});

describe('controls: a broken app fails the check written for its fault', () => {
  it('no middleware: concurrency and fingerprint fail (every duplicate runs)', async () => {
    const { target, knobs } = await startApp('external', 'no-middleware');
    const report = await runIdempotencyConformance(target, {
      only: ['concurrency', 'fingerprint', 'replay', 'missing-key', 'scope'],
      concurrency: 12,
    });
    console.log(formatConformanceReport(report));
    expect(report.passed).toBe(false);
    expect(resultOf(report, 'concurrency')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/expected 1 execution, counted 12/),
    });
    expect(resultOf(report, 'fingerprint')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/expected HTTP 422, got 200/),
    });
    for (const id of ['replay', 'missing-key', 'scope'] as const)
      expect(resultOf(report, id).passed).toBe(false);
    expect(knobs.executions).toBeGreaterThan(12);
  }, 60_000);

  it('no response headers: replays lack Idempotent-Replayed and 409s lack Retry-After', async () => {
    const { target } = await startApp('external', 'no-response-headers');
    const report = await runIdempotencyConformance(target, {
      only: ['replay', 'in-flight', 'in-flight-cap'],
    });
    console.log(formatConformanceReport(report));
    expect(resultOf(report, 'replay')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/expected Idempotent-Replayed: true/),
    });
    expect(resultOf(report, 'in-flight')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/Retry-After/),
    });
    expect(resultOf(report, 'in-flight-cap')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/Retry-After/),
    });
  }, 60_000);

  it('not batch-aware: the batched mutation runs (one call executes, its twin gets 409: a 207)', async () => {
    const { target, knobs } = await startApp('external', 'not-batch-aware');
    const report = await runIdempotencyConformance(target, { only: ['batched'] });
    expect(resultOf(report, 'batched')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/batch of two: expected HTTP 400, got 20[07]/),
    });
    expect(knobs.executions).toBeGreaterThan(0);
  });

  it('one scope for every principal: principal B gets A’s answer', async () => {
    const { target } = await startApp('external', 'one-scope-for-everyone');
    const report = await runIdempotencyConformance(target, { only: ['scope'] });
    expect(resultOf(report, 'scope')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/principal B got a replay/),
    });
  });

  it('business errors not stored: the same key runs the procedure again', async () => {
    const { target } = await startApp('transactional', 'errors-not-stored');
    const report = await runIdempotencyConformance(target, { only: ['stored-error'] });
    expect(resultOf(report, 'stored-error')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/expected Idempotent-Replayed: true/),
    });
  });

  it('a slow seam that does not slow: the in-flight check refuses to pass on no overlap', async () => {
    const { target } = await startApp('external', 'slow-seam-does-nothing');
    // The duplicate leaves 5 s after the first (default 200 ms): only a hang keeps an unslowed first request in
    // flight that long (at 200 ms, a loaded machine's first request was still running and the check passed).
    const report = await runIdempotencyConformance(target, {
      only: ['in-flight'],
      inFlightProbeDelayMs: 5_000,
    });
    expect(resultOf(report, 'in-flight')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/did not keep it in flight/),
    });
  });

  it('an unreachable app: every check fails with the cause, none throws', async () => {
    const { target } = await startApp('external');
    const report = await runIdempotencyConformance(
      { ...target, url: 'http://127.0.0.1:9/unreachable' },
      { only: ['first-request', 'missing-key'] },
    );
    expect(report.passed).toBe(false);
    for (const result of report.results) expect(result.detail).toMatch(/could not run: fetch failed/);
  });
});

describe('registerIdempotencyConformance: one test per check, through the runner the caller passes in', () => {
  it('registers the applicable checks; a failing check’s test throws its detail', async () => {
    const { target } = await startApp('external', 'no-middleware');
    const registered: Array<{ name: string; body: () => Promise<void>; timeoutMs?: number }> = [];
    const suites: string[] = [];
    const results: ConformanceCheckResult[] = [];
    registerIdempotencyConformance(
      { ...target, inFlightCap: undefined },
      {
        describe: (name, body) => {
          suites.push(name);
          body();
        },
        it: (name, body, timeoutMs) => {
          registered.push({ name, body, timeoutMs });
        },
      },
      {
        only: ['fingerprint', 'in-flight-cap', 'missing-key'],
        timeoutMs: 9_000,
        onResult: (result) => results.push(result),
      },
    );
    expect(suites).toEqual(['idempotency conformance: shop.placeOrder']);
    // in-flight-cap needs inFlightCap: not registered (no test that could only pass).
    expect(registered.map((test) => test.name.split(':')[0])).toEqual(['missing-key', 'fingerprint']);
    expect(registered.every((test) => test.timeoutMs === 9_000)).toBe(true);
    await expect(registered[1]?.body()).rejects.toThrow(/^fingerprint: .*expected HTTP 422, got 200/);
    expect(results.map((result) => [result.id, result.passed])).toEqual([['fingerprint', false]]);
  });
});

// The kit as a user would wire it into vitest: each check is a test of this file. The target's values are read
// when each test runs (a getter), so the server may start in beforeAll.
let registeredTarget: ConformanceTarget<Order> | undefined;
beforeAll(async () => {
  registeredTarget = (await startApp('external')).target;
});
function lazily(): ConformanceTarget<Order> {
  const get = () => {
    if (!registeredTarget) throw new Error('the app has not started');
    return registeredTarget;
  };
  return {
    get url() {
      return get().url;
    },
    procedure: 'shop.placeOrder',
    input: () => get().input(),
    differentInput: () => get().differentInput(),
    invalidInput: () => get().invalidInput(),
    serialize: superjson.serialize,
    get principals() {
      return get().principals;
    },
    unauthenticatedHeaders: {},
    executions: () => get().executions(),
    withHeldExecutions: (run) => get().withHeldExecutions?.(run) ?? Promise.reject(new Error('no gate')),
    inFlightCap: IN_FLIGHT_CAP,
    get store() {
      return get().store;
    },
  };
}
registerIdempotencyConformance(lazily(), { describe, it }, { concurrency: 8 });
