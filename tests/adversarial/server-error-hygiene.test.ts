/**
 * Issue 12, item 8: 5xx bodies carried internal messages (the provider client's "Payment provider rejected the
 * request (400): No such token…", "Payment provider answered 500", a Prisma error's SQL detail), and a
 * malformed cookie value (`idem_admin=%E0%A4%A`) made `decodeURIComponent` throw while resolving the principal.
 *
 * Over real HTTP on loopback: the app's tRPC route (and its handler, given routers of the test's own built on
 * the app's tRPC instance, whose procedures fail the way the provider client and Prisma do).
 * CONTROL: the same failing procedures on tRPC's stock formatting (what the app's formatter did with a 5xx:
 * message passed through) → the internal text is in the body.
 * PROTECTED: a generic message and `data.errorId`; the server's JSON log line carries that id and the real cause;
 * 4xx business messages unchanged; the malformed cookie counts as absent.
 */
import { createPrismaClient } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoUsers } from '@idem/dev-db/seed-data';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type CheckoutServers, startCheckoutServers } from '../../apps/web/test/helpers/checkout-servers.ts';
import { type LoopbackServer, serveOnLoopback } from '../../apps/web/test/helpers/loopback-http.ts';
import {
  fetchRequestHandler,
  initTRPC,
  superjson,
} from '../../packages/idempotency/test/support/server-peers.ts';

const PROVIDER_MESSAGE = 'Payment provider rejected the request (400): No such token: tok_h1_internal';
const MISSING_TABLE = 'no_such_table_h1_hygiene';

const db = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? '', max: 2 });
let servers: CheckoutServers;
let failing: LoopbackServer;
let stock: LoopbackServer;
let logger: typeof import('~/server/observability/log')['logger'];
let signGuest: (guestId: string) => Promise<string>;

/** What a failing provider client and a failing query throw (the app's own database client). */
async function failures() {
  const { db: appDb } = await import('~/server/db');
  return {
    provider: () => {
      throw new Error(PROVIDER_MESSAGE);
    },
    prisma: () => appDb.$queryRawUnsafe(`select * from ${MISSING_TABLE}`),
  };
}

beforeAll(async () => {
  await seedDatabase(db);
  servers = await startCheckoutServers(process.env.DATABASE_URL ?? '');
  ({ logger } = await import('~/server/observability/log'));
  const { env } = await import('~/env');
  const { signGuestSession } = await import('~/server/auth/session');
  signGuest = (guestId) => signGuestSession(guestId, env.SESSION_SECRET);

  const fail = await failures();
  const { createTRPCRouter, publicProcedure } = await import('~/server/trpc');
  const { createTrpcHandler } = await import('~/app/api/trpc/handler');
  const failingHandler = createTrpcHandler(
    createTRPCRouter({
      provider: publicProcedure.mutation(fail.provider),
      prisma: publicProcedure.mutation(fail.prisma),
    }),
  );
  failing = await serveOnLoopback({ POST: failingHandler });

  const t = initTRPC.create({ transformer: superjson, isDev: false });
  const stockRouter = t.router({
    provider: t.procedure.mutation(fail.provider),
    prisma: t.procedure.mutation(fail.prisma),
  });
  stock = await serveOnLoopback({
    POST: (req) => fetchRequestHandler({ endpoint: '/api/trpc', req, router: stockRouter }),
  });
});
afterAll(async () => {
  await failing?.close();
  await stock?.close();
  await servers?.close();
  await db.$disconnect();
});

interface ErrorBody {
  error: { json: { message: string; data: { code: string; httpStatus: number; errorId?: string } } };
}

async function post(
  baseUrl: string,
  path: string,
  init: { headers?: Record<string, string>; body?: unknown } = {},
) {
  const response = await fetch(`${baseUrl}/api/trpc/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...init.headers },
    body: JSON.stringify(init.body ?? { json: null }),
  });
  return { status: response.status, text: await response.text() };
}

/** Every `logger.error` call made while `action` runs. */
async function logged<T>(action: () => Promise<T>) {
  const spy = vi.spyOn(logger, 'error');
  try {
    const result = await action();
    return { result, lines: spy.mock.calls.map((call) => call[0] as unknown as Record<string, unknown>) };
  } finally {
    spy.mockRestore();
  }
}

describe('5xx bodies: a generic message and a correlation id; the cause only in the log', () => {
  it('CONTROL: stock formatting sends the provider client\u2019s and Prisma\u2019s messages to the client', async () => {
    const provider = await post(stock.url, 'provider');
    expect(provider.status).toBe(500);
    expect(provider.text).toContain('No such token: tok_h1_internal');
    const prisma = await post(stock.url, 'prisma');
    expect(prisma.status).toBe(500);
    expect(prisma.text).toContain(MISSING_TABLE);
  });

  it('PROTECTED: generic 500 bodies with data.errorId; the log line has the same id and the real cause', async () => {
    for (const [path, secret] of [
      ['provider', 'No such token'],
      ['prisma', MISSING_TABLE],
    ] as const) {
      const { result, lines } = await logged(() => post(failing.url, path));
      expect(result.status, path).toBe(500);
      expect(result.text, path).not.toContain(secret);
      const body = JSON.parse(result.text) as ErrorBody;
      expect(body.error.json.data.code).toBe('INTERNAL_SERVER_ERROR');
      const errorId = body.error.json.data.errorId ?? '';
      expect(errorId).toMatch(/^[0-9a-f-]{36}$/);
      expect(body.error.json.message).toBe(`Internal server error (error id ${errorId})`);
      expect(Object.keys(body.error.json.data).sort()).toEqual(['code', 'errorId', 'httpStatus', 'path']);

      const line = lines.find((entry) => entry.errorId === errorId);
      expect(line, `log line for ${path}`).toBeDefined();
      expect(line?.path).toBe(path);
      expect(String((line?.err as Error | undefined)?.message)).toContain(secret);
    }
  });

  it('PROTECTED: the same in a streamed response (jsonl): generic, with the id of its log line', async () => {
    const { result, lines } = await logged(async () => {
      const response = await fetch(`${failing.url}/api/trpc/provider?batch=1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'trpc-accept': 'application/jsonl' },
        body: JSON.stringify({ 0: { json: null } }),
      });
      return response.text();
    });
    expect(result).not.toContain('No such token');
    const errorId = /error id ([0-9a-f-]{36})/.exec(result)?.[1];
    expect(errorId).toBeDefined();
    const line = lines.find((entry) => entry.errorId === errorId);
    expect(String((line?.err as Error | undefined)?.message)).toContain('No such token');
  });

  it('PROTECTED: the checkout\u2019s 503 (provider down) is generic too, its cause logged; the retry still works', async () => {
    const key = crypto.randomUUID();
    const order = {
      json: { items: [{ sku: 'MUG-STONE', quantity: 1 }], email: 'alice@example.com', cardToken: 'tok_visa' },
    };
    const headers = { authorization: `Bearer ${demoUsers[0]?.token}`, 'idempotency-key': key };
    await fetch(`${servers.provider.url}/__knobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ failNext: 1 }),
    });
    const { result, lines } = await logged(() =>
      post(servers.app.url, 'checkout.placeOrder', { headers, body: order }),
    );
    expect(result.status).toBe(503);
    expect(result.text).not.toContain('Payment provider answered');
    const body = JSON.parse(result.text) as ErrorBody;
    const errorId = body.error.json.data.errorId ?? '';
    expect(body.error.json.data).toMatchObject({ code: 'SERVICE_UNAVAILABLE', httpStatus: 503 });
    expect(body.error.json.message).toMatch(/unavailable right now; retry later/);
    const line = lines.find((entry) => entry.errorId === errorId);
    expect(String((line?.err as Error | undefined)?.message)).toContain('Payment provider answered');

    const retry = await post(servers.app.url, 'checkout.placeOrder', { headers, body: order });
    expect(retry.status).toBe(200);
  });

  it('4xx business messages are unchanged (a declined card)', async () => {
    const declined = await post(servers.app.url, 'checkout.placeOrder', {
      headers: { authorization: `Bearer ${demoUsers[0]?.token}`, 'idempotency-key': crypto.randomUUID() },
      body: {
        json: {
          items: [{ sku: 'MUG-STONE', quantity: 1 }],
          email: 'alice@example.com',
          cardToken: 'tok_chargeDeclined',
        },
      },
    });
    expect(declined.status).toBe(402);
    const body = JSON.parse(declined.text) as ErrorBody;
    expect(body.error.json.message).toBe('Your card was declined.');
    expect(body.error.json.data.errorId).toBeUndefined();
  });
});

describe('a malformed cookie value counts as absent', () => {
  const MALFORMED = '%E0%A4%A';

  it('CONTROL: decoding it the naive way throws (the principal code did: every request was a 500)', () => {
    const naiveRead = (value: string) => decodeURIComponent(value);
    expect(() => naiveRead(MALFORMED)).toThrow(URIError);
  });

  it('PROTECTED: a malformed admin cookie beside a valid guest session → the guest (404 for an unknown order)', async () => {
    const guest = await signGuest(crypto.randomUUID());
    const response = await fetch(
      `${servers.app.url}/api/trpc/orders.byId?input=${encodeURIComponent(JSON.stringify({ json: { id: crypto.randomUUID() } }))}`,
      { headers: { cookie: `idem_admin=${MALFORMED}; idem_session=${guest}` } },
    );
    expect(response.status).toBe(404);
  });

  it('PROTECTED: a malformed session cookie alone → no principal (401), never a 500', async () => {
    const response = await fetch(
      `${servers.app.url}/api/trpc/orders.byId?input=${encodeURIComponent(JSON.stringify({ json: { id: crypto.randomUUID() } }))}`,
      { headers: { cookie: `idem_session=${MALFORMED}` } },
    );
    expect(response.status).toBe(401);
  });
});
