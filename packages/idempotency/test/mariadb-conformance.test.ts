/**
 * The conformance kit (`@idem/idempotency/testing`) against a small tRPC app on MariaDB, served over real HTTP:
 * the tRPC adapter with the MariaDB store passes every check in both modes (transactional: the order row is
 * written through the claim's transaction), and the same app without the middleware FAILS the kit (control).
 */
import type { AddressInfo } from 'node:net';
import { initTRPC, TRPCError } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMariadbIdempotencyStore, type PrismaTransactionLike } from '../src/mariadb/index.ts';
import {
  type ConformanceCheckId,
  type ConformanceReport,
  type ConformanceTarget,
  createInProcessGate,
  formatConformanceReport,
  runIdempotencyConformance,
} from '../src/testing/index.ts';
import { createIdempotency } from '../src/trpc/index.ts';
import { uniqueScope } from './support/db.ts';
import { connectMariadbWithOwnTable, type MariadbWithOwnTable } from './support/mariadb.ts';

type Db = MariadbWithOwnTable['db'];
let mariadb: MariadbWithOwnTable;
const servers: Array<{ close(): Promise<void> }> = [];
beforeAll(async () => {
  mariadb = await connectMariadbWithOwnTable(12);
  await mariadb.scratch.execute([
    'CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, app VARCHAR(64) NOT NULL, sku VARCHAR(64) NOT NULL, quantity INT NOT NULL)',
  ]);
});
afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  await mariadb?.dispose();
});

const IN_FLIGHT_CAP = 4;
type Mode = 'external' | 'transactional';

interface AppContext {
  headers: Headers;
  resHeaders: Headers;
  principal: string | null;
  batched: boolean;
}

const orderInput = z.object({ sku: z.string().min(1), quantity: z.number().int().positive() });
type Order = z.infer<typeof orderInput>;

async function startApp(mode: Mode, { protectedByMiddleware = true } = {}) {
  const db = mariadb.db;
  const app = `${mode}-${uniqueScope().slice(-12)}`;
  const t = initTRPC.context<AppContext>().create({ transformer: superjson, isDev: false });
  const store = createMariadbIdempotencyStore(db);
  const idempotency = createIdempotency<AppContext, PrismaTransactionLike<Db>>({
    store,
    transformer: superjson,
    getScope: (ctx) => ctx.principal,
    getRequestHeaders: (ctx) => ctx.headers,
    getResponseHeaders: (ctx) => ctx.resHeaders,
    isBatched: (ctx) => ctx.batched,
    defaults: { maxInFlightPerScope: IN_FLIGHT_CAP },
  });
  const knobs = { executions: 0, gate: createInProcessGate(), failing: false };

  /** The effect: one order row, written through the claim's transaction when there is one. */
  async function placeOrder(input: Order, on: Pick<Db, '$executeRawUnsafe'>) {
    knobs.executions += 1;
    await knobs.gate.pass();
    if (knobs.failing) throw new Error('simulated outage');
    if (input.sku === 'declined') throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Declined' });
    await on.$executeRawUnsafe(
      'INSERT INTO orders (app, sku, quantity) VALUES (?, ?, ?)',
      app,
      input.sku,
      input.quantity,
    );
    return { orderNumber: knobs.executions, total: 42n * BigInt(input.quantity), at: new Date() };
  }
  const shop = !protectedByMiddleware
    ? t.router({ placeOrder: t.procedure.input(orderInput).mutation(({ input }) => placeOrder(input, db)) })
    : mode === 'external'
      ? t.router({
          placeOrder: t.procedure
            .concat(idempotency.external())
            .input(orderInput)
            .mutation(({ input }) => placeOrder(input, db)),
        })
      : t.router({
          placeOrder: t.procedure
            .concat(idempotency.transactional())
            .input(orderInput)
            .mutation(({ input, ctx }) => placeOrder(input, ctx.idempotency.tx)),
        });
  const router = t.router({ shop });

  const server = createHTTPServer({
    router,
    createContext: ({ req, info }) => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers))
        for (const item of Array.isArray(value) ? value : value === undefined ? [] : [value])
          headers.append(name, item);
      return {
        headers,
        resHeaders: new Headers(),
        principal: headers.get('x-principal'),
        batched: info.calls.length > 1,
      };
    },
    responseMeta: ({ ctx }) => ({ headers: ctx?.resHeaders }),
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push({
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
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
    withHeldExecutions: (run) => knobs.gate.holdWhile(run),
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
  const orderRows = async () => {
    const [row] = await db.$queryRawUnsafe<Array<{ n: bigint }>>(
      'SELECT COUNT(*) AS n FROM orders WHERE app = ?',
      app,
    );
    return Number(row?.n ?? 0);
  };
  return { target, knobs, orderRows };
}

function resultOf(report: ConformanceReport, id: ConformanceCheckId) {
  const result = report.results.find((candidate) => candidate.id === id);
  if (!result) throw new Error(`${id} did not run:\n${formatConformanceReport(report)}`);
  return result;
}

describe.each(['external', 'transactional'] as const)('the tRPC adapter on MariaDB, %s mode', (mode) => {
  it('passes every check the kit has for it', async () => {
    const { target } = await startApp(mode);
    const report = await runIdempotencyConformance(target, { concurrency: 12 });
    console.log(formatConformanceReport(report));
    expect(report.results.filter((result) => !result.passed)).toEqual([]);
    expect(report.passed).toBe(true);
    expect(report.notCovered.map((skipped) => skipped.id)).toEqual(
      mode === 'external' ? [] : ['in-flight-cap'],
    );
    expect(report.results).toHaveLength(mode === 'external' ? 17 : 16);
  }, 90_000);

  it('12 concurrent requests with one key write one order row (control: without the middleware, 12)', async () => {
    const guarded = await startApp(mode);
    const report = await runIdempotencyConformance(guarded.target, {
      only: ['concurrency'],
      concurrency: 12,
    });
    expect(resultOf(report, 'concurrency').passed).toBe(true);
    expect(await guarded.orderRows()).toBe(1);

    const bare = await startApp(mode, { protectedByMiddleware: false });
    const control = await runIdempotencyConformance(bare.target, { only: ['concurrency'], concurrency: 12 });
    expect(resultOf(control, 'concurrency').passed).toBe(false);
    expect(await bare.orderRows()).toBe(12);
  }, 60_000);
});

describe('control: the same app without the middleware fails the kit', () => {
  it('concurrency, fingerprint, replay, missing-key and scope fail (every duplicate runs)', async () => {
    const { target, knobs } = await startApp('external', { protectedByMiddleware: false });
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
});
