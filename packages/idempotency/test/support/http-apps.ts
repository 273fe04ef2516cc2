/**
 * Small real apps for the plain HTTP adapters, on the run's Postgres: one route, `POST /orders`, that inserts
 * an order row (through the claim's transaction in transactional mode) and answers 201 with Location, ETag and
 * a body that differs on every execution. Each is served over real HTTP — the Fetch adapter by Hono on
 * @hono/node-server, the Express middleware by Express 5 — and described as a conformance target. A
 * `protected: false` app is the same route with no idempotency at all: the control.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Database } from '@idem/db';
import express from 'express';
import { Hono } from 'hono';
import { createExpressIdempotency } from '../../src/express/index.ts';
import { createFetchIdempotency } from '../../src/fetch/index.ts';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../../src/prisma/index.ts';
import { type ConformanceTarget, createInProcessGate, type InProcessGate } from '../../src/testing/index.ts';
import { uniqueScope, uniqueTableName } from './db.ts';

export type Adapter = 'fetch' | 'express';
export type Mode = 'transactional' | 'external';
export const IN_FLIGHT_CAP = 4;
export const PROCEDURE = 'orders.create';

export interface Order {
  sku: string;
  quantity: number;
}

type Writer = Pick<Database, '$executeRawUnsafe'>;

interface Knobs {
  /** Held executions stop here (after their claim) until the conformance check releases them. */
  gate: InProcessGate;
  failing: boolean;
}

/** The route's own work, the same for every adapter: validate, maybe fail, insert, answer. */
async function placeOrder(writer: Writer, table: string, app: string, body: unknown, knobs: Knobs) {
  const order = body as Partial<Order> | null;
  if (
    typeof order?.sku !== 'string' ||
    order.sku === '' ||
    !Number.isInteger(order.quantity) ||
    (order.quantity ?? 0) < 1
  )
    return { status: 400, json: { error: 'sku (non-empty) and quantity (≥ 1) are required' } };
  await knobs.gate.pass();
  if (knobs.failing) return { status: 503, json: { error: 'downstream unavailable' } };
  if (order.sku === 'declined') return { status: 402, json: { error: 'card declined' } };
  const rows = (await writer.$executeRawUnsafe(
    `insert into ${table} (app, sku, quantity) values ($1, $2, $3)`,
    app,
    order.sku,
    order.quantity,
  )) as number;
  if (rows !== 1) throw new Error('insert failed');
  const number = `${Date.now()}-${Math.random().toString(36).slice(2)}`;
  return {
    status: 201,
    json: { number, sku: order.sku, quantity: order.quantity, at: new Date().toISOString() },
    location: `/orders/${number}`,
    etag: `"${number}"`,
  };
}

export async function createOrdersTable(db: Database): Promise<string> {
  const table = uniqueTableName('http_orders');
  await db.$executeRawUnsafe(
    `create table ${table} (id bigserial primary key, app text not null, sku text not null, quantity int not null)`,
  );
  return table;
}

export interface StartedApp {
  target: ConformanceTarget<Order>;
  close(): Promise<void>;
}

export async function startHttpApp(
  db: Database,
  table: string,
  adapter: Adapter,
  mode: Mode,
  { protected: isProtected = true } = {},
): Promise<StartedApp> {
  const app = uniqueScope();
  const knobs: Knobs = { gate: createInProcessGate(), failing: false };
  const store = createPrismaIdempotencyStore(db);
  const options = { procedure: PROCEDURE, maxInFlightPerScope: IN_FLIGHT_CAP };
  const onError = () => {};
  const listening =
    adapter === 'fetch'
      ? serveFetch(db, table, app, knobs, mode, isProtected, store, options, onError)
      : serveExpress(db, table, app, knobs, mode, isProtected, store, options, onError);
  const { port, close } = await listening;

  const scopes = [uniqueScope(), uniqueScope()] as const;
  const target: ConformanceTarget<Order> = {
    protocol: 'http',
    url: `http://127.0.0.1:${port}/orders`,
    procedure: PROCEDURE,
    input: () => ({ sku: 'book', quantity: 1 }),
    differentInput: () => ({ sku: 'book', quantity: 2 }),
    invalidInput: () => ({ sku: '', quantity: -1 }),
    principals: [
      { headers: { 'x-principal': scopes[0] }, scope: scopes[0] },
      { headers: { 'x-principal': scopes[1] }, scope: scopes[1] },
    ],
    unauthenticatedHeaders: {},
    executions: async () => {
      const [row] = await db.$queryRawUnsafe<Array<{ count: bigint }>>(
        `select count(*) as count from ${table} where app = $1`,
        app,
      );
      return Number(row?.count ?? 0);
    },
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
  return { target, close };
}

type Store = ReturnType<typeof createPrismaIdempotencyStore<Database>>;
type Tx = PrismaTransactionLike<Database>;
type RouteOptions = { procedure: string; maxInFlightPerScope: number };

async function serveFetch(
  db: Database,
  table: string,
  app: string,
  knobs: Knobs,
  mode: Mode,
  isProtected: boolean,
  store: Store,
  options: RouteOptions,
  onError: (error: unknown) => void,
) {
  const idempotency = createFetchIdempotency<Tx>({
    store,
    getScope: (request) => request.headers.get('x-principal'),
    onError,
  });
  const respond = async (request: Request, writer: Writer) => {
    const body = await request.json().catch(() => null);
    const answer = await placeOrder(writer, table, app, body, knobs);
    const headers: Record<string, string> = {};
    if ('location' in answer && answer.location) headers.location = answer.location;
    if ('etag' in answer && answer.etag) headers.etag = answer.etag;
    return Response.json(answer.json, { status: answer.status, headers });
  };
  const handler = !isProtected
    ? (request: Request) => respond(request, db)
    : mode === 'transactional'
      ? idempotency.transactional((request, { tx }) => respond(request, tx as Writer), options)
      : idempotency.external((request) => respond(request, db), options);
  const hono = new Hono();
  hono.post('/orders', (c) => handler(c.req.raw));
  return listen((resolve) => {
    const server = serve({ fetch: hono.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(info.port));
    return server as unknown as import('node:http').Server;
  });
}

async function serveExpress(
  db: Database,
  table: string,
  app: string,
  knobs: Knobs,
  mode: Mode,
  isProtected: boolean,
  store: Store,
  options: RouteOptions,
  onError: (error: unknown) => void,
) {
  const idempotency = createExpressIdempotency<Tx>({
    store,
    getScope: (req) => req.get('x-principal'),
    onError,
  });
  const server = express();
  const protection = !isProtected
    ? (_req: express.Request, _res: express.Response, next: express.NextFunction) => next()
    : mode === 'transactional'
      ? idempotency.transactional(options)
      : idempotency.external(options);
  server.post('/orders', express.json(), protection, async (req, res) => {
    const writer = isProtected && mode === 'transactional' ? (idempotency.tx(res) as Writer) : db;
    const answer = await placeOrder(writer, table, app, req.body, knobs);
    if ('location' in answer && answer.location) res.location(answer.location);
    if ('etag' in answer && answer.etag) res.set('etag', answer.etag);
    res.status(answer.status).json(answer.json);
  });
  return listen((resolve) => server.listen(0, '127.0.0.1', () => resolve(0)));
}

async function listen(
  start: (resolve: (port: number) => void) => import('node:http').Server,
): Promise<{ port: number; close(): Promise<void> }> {
  let server!: import('node:http').Server;
  await new Promise<number>((resolve) => {
    server = start(resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
