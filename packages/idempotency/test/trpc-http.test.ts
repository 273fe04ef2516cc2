/**
 * The contract's HTTP table, through tRPC's fetch adapter (no server: Request in, Response out): status codes,
 * `Retry-After`, `Idempotent-Replayed` and byte-identical replayed bodies.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { connectWithOwnTable, deferred, uniqueScope, waitUntil } from './support/db.ts';
import { createTestTRPC, keyRows } from './support/trpc.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

function setup() {
  const { t, idempotency } = createTestTRPC(db);
  let executions = 0;
  let gate: Promise<void> | null = null;
  const router = t.router({
    checkout: t.router({
      placeOrder: t.procedure
        .concat(idempotency.external())
        .input(z.object({ sku: z.string(), quantity: z.number().int().positive() }))
        .mutation(async ({ input }) => {
          executions += 1;
          if (gate) await gate;
          if (input.sku === 'declined')
            throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Declined' });
          if (input.sku === 'flaky') throw new Error('provider down');
          return { orderId: executions, total: 42n * BigInt(input.quantity), createdAt: new Date() };
        }),
      tag: t.procedure
        .concat(idempotency.external())
        .input(z.object({ tags: z.set(z.string()), limit: z.bigint() }))
        .mutation(({ input }) => {
          executions += 1;
          return { tags: [...input.tags], limit: input.limit };
        }),
      other: t.procedure
        .concat(idempotency.external())
        .input(z.object({ sku: z.string(), quantity: z.number() }))
        .mutation(() => 'ok'),
    }),
  });

  function post(
    path: string,
    input: unknown,
    { key, principal, batch }: { key?: string | null; principal?: string | null; batch?: boolean } = {},
  ) {
    const headers = new Headers({ 'content-type': 'application/json' });
    if (key) headers.set('Idempotency-Key', key);
    if (principal) headers.set('x-principal', principal);
    const body = batch
      ? JSON.stringify({ 0: superjson.serialize(input), 1: superjson.serialize(input) })
      : JSON.stringify(superjson.serialize(input));
    const url = batch
      ? `http://localhost/api/trpc/${path},checkout.other?batch=1`
      : `http://localhost/api/trpc/${path}`;
    return fetchRequestHandler({
      endpoint: '/api/trpc',
      req: new Request(url, { method: 'POST', headers, body }),
      router,
      createContext: ({ req, resHeaders, info }) => ({
        headers: req.headers,
        resHeaders,
        principalId: req.headers.get('x-principal'),
        batched: info.calls.length > 1,
      }),
    });
  }

  return {
    post,
    executions: () => executions,
    setGate: (promise: Promise<void> | null) => {
      gate = promise;
    },
  };
}

const order = { sku: 'book', quantity: 2 };

describe('over HTTP', () => {
  it('200, then a byte-identical replay with Idempotent-Replayed: true', async () => {
    const { post, executions } = setup();
    const principal = uniqueScope();
    const key = randomUUID();
    const first = await post('checkout.placeOrder', order, { key, principal });
    expect(first.status).toBe(200);
    expect(first.headers.get('Idempotent-Replayed')).toBeNull();
    const firstBody = await first.text();
    // The superjson types (BigInt, Date) are in the body.
    expect(firstBody).toContain('"bigint"');
    expect(firstBody).toContain('"Date"');

    const replay = await post(
      'checkout.placeOrder',
      { quantity: 2, sku: 'book' },
      { key: `"${key}"`, principal },
    );
    expect(replay.status).toBe(200);
    expect(replay.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await replay.text()).toBe(firstBody);
    expect(executions()).toBe(1);
  });

  it('a stored business error: its own 4xx, replayed byte-identically', async () => {
    const { post, executions } = setup();
    const principal = uniqueScope();
    const key = randomUUID();
    const input = { sku: 'declined', quantity: 1 };
    const first = await post('checkout.placeOrder', input, { key, principal });
    expect(first.status).toBe(402);
    const firstBody = await first.text();
    const replay = await post('checkout.placeOrder', input, { key, principal });
    expect(replay.status).toBe(402);
    expect(replay.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await replay.text()).toBe(firstBody);
    expect(executions()).toBe(1);
  });

  it('a transient failure: 500, not stored, the retry runs again', async () => {
    const { post, executions } = setup();
    const principal = uniqueScope();
    const key = randomUUID();
    const input = { sku: 'flaky', quantity: 1 };
    expect((await post('checkout.placeOrder', input, { key, principal })).status).toBe(500);
    expect(await keyRows(db, principal)).toEqual([]);
    const retry = await post('checkout.placeOrder', input, { key, principal });
    expect(retry.status).toBe(500);
    expect(retry.headers.get('Idempotent-Replayed')).toBeNull();
    expect(executions()).toBe(2);
  });

  it('400 for a missing, malformed or repeated header and for invalid input; 401 without a principal', async () => {
    const { post, executions } = setup();
    const principal = uniqueScope();
    const key = randomUUID();
    expect((await post('checkout.placeOrder', order, { principal })).status).toBe(400);
    expect((await post('checkout.placeOrder', order, { key: 'x'.repeat(256), principal })).status).toBe(400);
    expect((await post('checkout.placeOrder', order, { key: `${key}, ${key}`, principal })).status).toBe(400);
    expect((await post('checkout.placeOrder', order, { key: '"a";p=1', principal })).status).toBe(400);
    expect((await post('checkout.placeOrder', { sku: 'book' }, { key, principal })).status).toBe(400);
    expect((await post('checkout.placeOrder', order, { key })).status).toBe(401);
    expect(executions()).toBe(0);
    expect(await keyRows(db, principal)).toEqual([]);
    // Control: the same request, complete, runs.
    expect((await post('checkout.placeOrder', order, { key, principal })).status).toBe(200);
  });

  it('an idempotent mutation in a batch → 400 (its key belongs to one operation)', async () => {
    const { post, executions } = setup();
    const principal = uniqueScope();
    const response = await post('checkout.placeOrder', order, { key: randomUUID(), principal, batch: true });
    const body = (await response.json()) as Array<{ error?: { json: { data: { httpStatus: number } } } }>;
    expect(body).toHaveLength(2);
    for (const item of body) expect(item.error?.json.data.httpStatus).toBe(400);
    expect(executions()).toBe(0);
  });

  it('422 for the same key with another input; 409 + Retry-After while the first runs', async () => {
    const { post, executions, setGate } = setup();
    const principal = uniqueScope();
    const key = randomUUID();
    const gate = deferred();
    setGate(gate.promise);
    const first = post('checkout.placeOrder', order, { key, principal });
    await waitUntil(() => executions() === 1);

    const conflict = await post('checkout.placeOrder', order, { key, principal });
    expect(conflict.status).toBe(409);
    expect(conflict.headers.get('Retry-After')).toBe('1');

    const mismatch = await post('checkout.placeOrder', { ...order, quantity: 3 }, { key, principal });
    expect(mismatch.status).toBe(422);
    expect(mismatch.headers.get('Retry-After')).toBeNull();

    gate.resolve();
    expect((await first).status).toBe(200);
    expect((await post('checkout.placeOrder', { ...order, quantity: 3 }, { key, principal })).status).toBe(
      422,
    );
    expect(executions()).toBe(1);
  });

  it('superjson inputs (Set, BigInt) are fingerprinted as sent: a different Set is another request → 422', async () => {
    const { post, executions } = setup();
    const principal = uniqueScope();
    const key = randomUUID();
    const input = { tags: new Set(['a', 'b']), limit: 10n };
    const first = await post('checkout.tag', input, { key, principal });
    expect(first.status).toBe(200);
    const firstBody = await first.text();
    // Control: the same Set and BigInt replay.
    const replay = await post('checkout.tag', { limit: 10n, tags: new Set(['a', 'b']) }, { key, principal });
    expect(replay.status).toBe(200);
    expect(await replay.text()).toBe(firstBody);
    // Another Set, or another BigInt, is another request.
    expect((await post('checkout.tag', { ...input, tags: new Set(['c']) }, { key, principal })).status).toBe(
      422,
    );
    expect((await post('checkout.tag', { ...input, limit: 11n }, { key, principal })).status).toBe(422);
    expect(executions()).toBe(1);
  });
});
