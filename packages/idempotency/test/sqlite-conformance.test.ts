/**
 * The conformance kit (`@idem/idempotency/testing`) against a small real tRPC app on SQLite (tRPC's standalone
 * HTTP adapter, the SQLite store on a WAL database file through Prisma's better-sqlite3 adapter): the app passes
 * every check in both modes, and the same app without the middleware FAILS the kit (the control).
 */
import type { AddressInfo } from 'node:net';
import type { SqliteDatabase } from '@idem/db-sqlite';
import { initTRPC, TRPCError } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSqliteIdempotencyStore, type PrismaTransactionLike } from '../src/sqlite/index.ts';
import {
  type ConformanceTarget,
  createInProcessGate,
  formatConformanceReport,
  runIdempotencyConformance,
} from '../src/testing/index.ts';
import { createIdempotency } from '../src/trpc/index.ts';
import { uniqueScope } from './support/db.ts';
import { connectSqlite } from './support/sqlite-db.ts';

let db: SqliteDatabase;
const servers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  ({ db } = await connectSqlite());
});
afterAll(async () => {
  await Promise.all(servers.map((close) => close()));
  await db.$disconnect();
});

const IN_FLIGHT_CAP = 4;
type Mode = 'external' | 'transactional' | 'no-middleware';

interface AppContext {
  headers: Headers;
  resHeaders: Headers;
  principal: string | null;
  batched: boolean;
}

const orderInput = z.object({ sku: z.string().min(1), quantity: z.number().int().positive() });
type Order = z.infer<typeof orderInput>;

async function startApp(mode: Mode) {
  const t = initTRPC.context<AppContext>().create({ transformer: superjson, isDev: false });
  const store = createSqliteIdempotencyStore(db);
  const idempotency = createIdempotency<AppContext, PrismaTransactionLike<SqliteDatabase>>({
    store,
    transformer: superjson,
    getScope: (ctx) => ctx.principal,
    getRequestHeaders: (ctx) => ctx.headers,
    getResponseHeaders: (ctx) => ctx.resHeaders,
    isBatched: (ctx) => ctx.batched,
    defaults: { maxInFlightPerScope: IN_FLIGHT_CAP },
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
    mode === 'no-middleware'
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
  servers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  const scopes = [uniqueScope(), uniqueScope()] as const;
  const withKnob =
    (knob: 'failing') =>
    async <T>(run: () => Promise<T>) => {
      knobs[knob] = true;
      try {
        return await run();
      } finally {
        knobs[knob] = false;
      }
    };
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
    withTransientFailure: withKnob('failing'),
    ...(mode === 'external' ? { inFlightCap: IN_FLIGHT_CAP } : {}),
    store,
  };
  return { target, knobs };
}

describe.each(['external', 'transactional'] as const)('tRPC on SQLite, %s mode', (mode) => {
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
  }, 60_000);
});

describe('CONTROL: the same app on SQLite without the middleware', () => {
  it('fails the kit: every duplicate runs', async () => {
    const { target, knobs } = await startApp('no-middleware');
    const report = await runIdempotencyConformance(target, {
      only: ['concurrency', 'fingerprint', 'replay'],
      concurrency: 12,
    });
    console.log(formatConformanceReport(report));
    expect(report.passed).toBe(false);
    for (const id of ['concurrency', 'fingerprint', 'replay'])
      expect(report.results.find((result) => result.id === id)?.passed).toBe(false);
    expect(report.results.find((result) => result.id === 'concurrency')?.detail).toMatch(
      /expected 1 execution, counted 12/,
    );
    expect(knobs.executions).toBeGreaterThan(12);
  }, 60_000);
});
