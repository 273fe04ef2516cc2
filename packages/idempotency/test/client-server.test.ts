/**
 * The client half against the REAL server half: idempotentRetryLink + httpLink in front of a router whose
 * mutation uses `idempotency.external()` on this run's Postgres (through tRPC's fetch adapter). Checks that the
 * link reads what the server actually sends: `Idempotent-Replayed`, 409 + `Retry-After`, released 5xx.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { createTRPCClient, httpLink } from '@trpc/client';
import { TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { idempotencyHeaders, idempotentRetryLink, type RetryLinkEvent } from '../src/client/index.ts';
import { connect, deferred, uniqueScope, waitUntil } from './support/db.ts';
import { createTestTRPC } from './support/trpc.ts';

let db: Database;
beforeAll(() => {
  db = connect();
});
afterAll(async () => {
  await db.$disconnect();
});

function setup() {
  const { t, idempotency } = createTestTRPC(db);
  let executions = 0;
  let transientFailures = 0;
  let gate: Promise<void> | null = null;
  const router = t.router({
    checkout: t.router({
      placeOrder: t.procedure
        .concat(idempotency.external())
        .input(z.object({ sku: z.string(), quantity: z.number().int().positive() }))
        .mutation(async ({ input }) => {
          executions += 1;
          if (gate) await gate;
          if (transientFailures > 0) {
            transientFailures -= 1;
            throw new TRPCError({ code: 'SERVICE_UNAVAILABLE', message: 'provider down' });
          }
          if (input.sku === 'declined')
            throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'Declined' });
          return { orderId: executions, sku: input.sku };
        }),
    }),
  });

  const principal = uniqueScope();
  const statuses: number[] = [];
  let dropNextResponse = false;
  const fetch = async (url: string | URL | Request, init?: RequestInit) => {
    const req = new Request(url, init);
    req.headers.set('x-principal', principal);
    const response = await fetchRequestHandler({
      endpoint: '/api/trpc',
      req,
      router,
      createContext: ({ req, resHeaders, info }) => ({
        headers: req.headers,
        resHeaders,
        principalId: req.headers.get('x-principal'),
        batched: info.calls.length > 1,
      }),
    });
    statuses.push(response.status);
    if (dropNextResponse) {
      dropNextResponse = false;
      throw new TypeError('fetch failed');
    }
    return response;
  };

  const delays: number[] = [];
  let onSleep: () => void | Promise<void> = () => {};
  const client = createTRPCClient<typeof router>({
    links: [
      idempotentRetryLink({
        random: () => 1,
        sleep: async (ms) => {
          delays.push(ms);
          await onSleep();
        },
      }),
      httpLink({
        url: 'http://shop.test/api/trpc',
        transformer: superjson,
        fetch,
        headers: ({ op }) => idempotencyHeaders(op),
      }),
    ],
  });
  const events: RetryLinkEvent[] = [];
  const context = {
    idempotencyKey: randomUUID(),
    idempotencyObserver: (event: RetryLinkEvent) => events.push(event),
  };

  return {
    client,
    context,
    events,
    delays,
    statuses,
    executions: () => executions,
    dropNextResponse: () => {
      dropNextResponse = true;
    },
    failTransiently: (times: number) => {
      transientFailures = times;
    },
    setGate: (promise: Promise<void> | null) => {
      gate = promise;
    },
    onSleep: (callback: () => void | Promise<void>) => {
      onSleep = callback;
    },
  };
}

describe('client link × real idempotency middleware', () => {
  it('a lost response: the retry with the same key is replayed (Idempotent-Replayed), run once', async () => {
    const shop = setup();
    shop.dropNextResponse();

    const order = await shop.client.checkout.placeOrder.mutate(
      { sku: 'book', quantity: 1 },
      { context: shop.context },
    );

    expect(order).toEqual({ orderId: 1, sku: 'book' });
    expect(shop.executions()).toBe(1);
    expect(shop.statuses).toEqual([200, 200]);
    expect(shop.events.at(-1)).toEqual({ type: 'response', ok: true, replayed: true, status: 200 });
  });

  it('a transient 503 released the key: the retry runs again, fresh', async () => {
    const shop = setup();
    shop.failTransiently(1);

    await shop.client.checkout.placeOrder.mutate({ sku: 'book', quantity: 1 }, { context: shop.context });

    expect(shop.statuses).toEqual([503, 200]);
    expect(shop.executions()).toBe(2);
    expect(shop.delays).toEqual([500]);
    expect(shop.events.at(-1)).toMatchObject({ type: 'response', replayed: false });
  });

  it('the same key in flight: 409 + Retry-After is waited out, then the stored result is replayed', async () => {
    const shop = setup();
    const gate = deferred();
    shop.setGate(gate.promise);
    const input = { sku: 'book', quantity: 1 };
    const first = shop.client.checkout.placeOrder.mutate(input, {
      context: { idempotencyKey: shop.context.idempotencyKey },
    });
    await waitUntil(() => shop.executions() === 1);
    // The first request completes while the duplicate waits Retry-After (the wait ends once it has).
    shop.onSleep(async () => {
      gate.resolve();
      await first;
    });

    const duplicate = await shop.client.checkout.placeOrder.mutate(input, { context: shop.context });

    expect(await first).toEqual(duplicate);
    expect(shop.executions()).toBe(1);
    expect(shop.delays).toEqual([1000]); // Retry-After: 1, not the 500 ms backoff
    expect(shop.events).toContainEqual(
      expect.objectContaining({ type: 'retrying', reason: 'in-progress', delayMs: 1000 }),
    );
    expect(shop.events.at(-1)).toMatchObject({ type: 'response', replayed: true });
    expect(shop.statuses).toEqual(expect.arrayContaining([409, 200, 200]));
  });

  it('a declined card (402, stored) is final: no retry', async () => {
    const shop = setup();
    await expect(
      shop.client.checkout.placeOrder.mutate({ sku: 'declined', quantity: 1 }, { context: shop.context }),
    ).rejects.toMatchObject({ data: { httpStatus: 402 } });
    expect(shop.statuses).toEqual([402]);
    expect(shop.delays).toEqual([]);
  });
});
