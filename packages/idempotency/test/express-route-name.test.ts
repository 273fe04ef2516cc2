/**
 * Express routes ignore case and a trailing slash: `/orders`, `/orders/` and `/ORDERS` reach one handler. The
 * middleware named a route's key space after the literal path, so one key with one body sent to the three ran
 * the handler three times (issue 29, item 3). The route is now named from what Express matched (its pattern
 * under its mount path, case and trailing slash as the app routes them): one execution, and the same key sent to
 * another spelling of the path is refused with 422 (the literal target stays in the fingerprint). The CONTROL
 * shows the premise: without the middleware, the three spellings run the one handler three times.
 */
import type { Database } from '@idem/db';
import express from 'express';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { IdempotencyEvent } from '../src/express/index.ts';
import { createExpressIdempotency } from '../src/express/index.ts';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../src/prisma/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';
import { listen } from './support/listen.ts';

type Tx = PrismaTransactionLike<Database>;
let db: Database;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await connectWithOwnTable(4);
});
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
  await db.$disconnect();
});

const SPELLINGS = ['/orders', '/orders/', '/ORDERS'];

async function serve(
  build: (app: express.Express, idempotency: ReturnType<typeof createExpressIdempotency<Tx>>) => void,
  settings: Record<string, boolean> = {},
) {
  const events: IdempotencyEvent[] = [];
  const idempotency = createExpressIdempotency<Tx>({
    store: createPrismaIdempotencyStore(db),
    getScope: (req) => req.get('x-principal'),
    onEvent: (event) => events.push(event),
  });
  const app = express();
  for (const [name, value] of Object.entries(settings)) app.set(name, value);
  build(app, idempotency);
  const { url: base, close } = await listen(app);
  closers.push(close);
  const scope = uniqueScope();
  const post = (path: string, key = 'k-spelling') =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'x-principal': scope, 'idempotency-key': key, 'content-type': 'application/json' },
      body: '{"sku":"book"}',
    });
  return { post, events };
}

it('CONTROL: without the middleware, /orders, /orders/ and /ORDERS run the one handler three times', async () => {
  let runs = 0;
  const { post } = await serve((app) => {
    app.post('/orders', express.json(), (_req, res) => {
      runs += 1;
      res.status(201).json({ run: runs });
    });
  });
  for (const path of SPELLINGS) expect((await post(path)).status, path).toBe(201);
  expect(runs).toBe(3);
});

it('route-level middleware: one key over the three spellings → one execution, the others 422; a replay at the first', async () => {
  let runs = 0;
  const { post, events } = await serve((app, idempotency) => {
    app.post('/orders', express.json(), idempotency.transactional(), (_req, res) => {
      runs += 1;
      res.status(201).json({ run: runs });
    });
  });
  const statuses = [];
  for (const path of SPELLINGS) statuses.push((await post(path)).status);
  expect(statuses).toEqual([201, 422, 422]);
  expect((await post('/orders')).headers.get('idempotent-replayed')).toBe('true');
  expect(runs).toBe(1);
  expect(new Set(events.map((event) => event.procedure))).toEqual(new Set(['POST /orders']));
});

it('a pattern with parameters names one space: the same key at /orders/7/pay and /orders/8/pay → 422, not a second run', async () => {
  let runs = 0;
  const { post, events } = await serve((app, idempotency) => {
    app.post('/orders/:id/pay', express.json(), idempotency.external(), (req, res) => {
      runs += 1;
      res.json({ paid: req.params.id });
    });
  });
  expect((await post('/orders/7/pay')).status).toBe(200);
  expect((await post('/Orders/8/pay/')).status).toBe(422);
  expect(runs).toBe(1);
  expect(events.map((event) => event.procedure)).toEqual(['POST /orders/:id/pay', 'POST /orders/:id/pay']);
});

it('app-level middleware (no route matched yet) normalises the path the same way; a case-sensitive, strict app keeps it', async () => {
  let runs = 0;
  const loose = await serve((app, idempotency) => {
    app.use(express.json(), idempotency.transactional());
    app.post('/orders', (_req, res) => {
      runs += 1;
      res.sendStatus(201);
    });
  });
  for (const path of SPELLINGS) await loose.post(path);
  expect(runs).toBe(1);
  expect(new Set(loose.events.map((event) => event.procedure))).toEqual(new Set(['POST /orders']));

  const strict = await serve(
    (app, idempotency) => {
      app.use(express.json(), idempotency.transactional());
      app.post(['/orders', '/orders/', '/ORDERS'], (_req, res) => res.sendStatus(201));
    },
    { 'case sensitive routing': true, 'strict routing': true },
  );
  for (const path of SPELLINGS) expect((await strict.post(path)).status, path).toBe(201);
  expect(strict.events.map((event) => event.procedure)).toEqual([
    'POST /orders',
    'POST /orders/',
    'POST /ORDERS',
  ]);
});
