/**
 * idempotentRetryLink end to end over HTTP: a real tRPC client (retry link + httpLink with a `fetch` stub) in
 * front of a real tRPC router served by `fetchRequestHandler`, which emulates the idempotency contract.
 */
import { randomUUID } from 'node:crypto';
import { createTRPCClient, type TRPCClientError } from '@trpc/client';
import { describe, expect, expectTypeOf, it, vi } from 'vitest';
import {
  classifyFailure,
  type IdempotentProcedurePath,
  type IdempotentRetryLinkOptions,
  idempotentRetryLink,
  MissingIdempotencyKeyError,
  type RetryLinkEvent,
} from '../src/client/index.ts';
import { anOrder, createFakeShop, type FakeShopRouter, recordingSleep } from './client-fake-shop.ts';

function setup(
  linkOptions: IdempotentRetryLinkOptions<FakeShopRouter> = {},
  shopOptions: { retryAfter?: string } = {},
) {
  const shop = createFakeShop(shopOptions);
  const { delays, sleep } = recordingSleep();
  const client = createTRPCClient<FakeShopRouter>({
    links: [
      idempotentRetryLink<FakeShopRouter>({ sleep, random: () => 1, ...linkOptions }),
      shop.terminatingLink(),
    ],
  });
  const events: RetryLinkEvent[] = [];
  const key = randomUUID();
  const context = {
    idempotencyKey: key,
    idempotencyObserver: (event: RetryLinkEvent) => events.push(event),
  };
  return { shop, client, delays, events, key, context };
}

async function failure(promise: Promise<unknown>): Promise<TRPCClientError<FakeShopRouter>> {
  try {
    await promise;
  } catch (error) {
    return error as TRPCClientError<FakeShopRouter>;
  }
  throw new Error('expected the call to fail');
}

describe('idempotentRetryLink', () => {
  it('re-sends the same operation with the same key after a lost response; the server replays', async () => {
    const { shop, client, delays, events, key, context } = setup();
    shop.faults.push('drop-response');

    const order = await client.checkout.placeOrder.mutate(anOrder, { context });

    expect(order).toEqual({ id: 1, email: anOrder.email, total: 100 });
    expect(shop.executions).toBe(1);
    expect(shop.requests.map((request) => request.key)).toEqual([key, key]);
    expect(shop.requests.map((request) => request.input)).toEqual([anOrder, anOrder]);
    expect(delays).toEqual([500]);
    expect(events).toEqual([
      { type: 'attempt', attempt: 1, maxAttempts: 5 },
      { type: 'retrying', attempt: 1, delayMs: 500, reason: 'network', error: expect.anything() },
      { type: 'attempt', attempt: 2, maxAttempts: 5 },
      { type: 'response', ok: true, replayed: true, status: 200 },
    ]);
  });

  it('retries 5xx (the key was released) with the backoff schedule, and reports a fresh response', async () => {
    const { shop, client, delays, events, context } = setup();
    shop.faults.push(503, 'html-500', 'drop-request');

    await expect(client.checkout.placeOrder.mutate(anOrder, { context })).resolves.toMatchObject({ id: 1 });

    expect(shop.requests).toHaveLength(4);
    expect(shop.executions).toBe(1);
    expect(delays).toEqual([500, 1000, 2000]);
    expect(events.filter((event) => event.type === 'retrying').map((event) => event.reason)).toEqual([
      'server-error',
      'network',
      'network',
    ]);
    expect(events.at(-1)).toEqual({ type: 'response', ok: true, replayed: false, status: 200 });
  });

  it('stops at maxAttempts and fails with the last (retryable) error', async () => {
    const { shop, client, delays, events, key, context } = setup({ maxAttempts: 3 });
    shop.faults.push(503, 503, 503, 503);

    const error = await failure(client.checkout.placeOrder.mutate(anOrder, { context }));

    expect(error.data?.httpStatus).toBe(503);
    expect(classifyFailure(error)).toBe('retry');
    expect(shop.requests.map((request) => request.key)).toEqual([key, key, key]);
    expect(delays).toEqual([500, 1000]);
    expect(events.filter((event) => event.type === 'attempt').map((event) => event.attempt)).toEqual([
      1, 2, 3,
    ]);
    expect(events.some((event) => event.type === 'response')).toBe(false);
  });

  it('with maxAttempts 1 never retries', async () => {
    const { shop, client, context } = setup({ maxAttempts: 1 });
    shop.faults.push('drop-request');
    await failure(client.checkout.placeOrder.mutate(anOrder, { context }));
    expect(shop.requests).toHaveLength(1);
  });

  it.each([
    [402, 'PAYMENT_REQUIRED'],
    [422, 'UNPROCESSABLE_CONTENT'],
  ] as const)('does not retry a final business error (%s)', async (status, code) => {
    const { shop, client, delays, events, context } = setup();
    shop.faults.push(status);

    const error = await failure(client.checkout.placeOrder.mutate(anOrder, { context }));

    expect(error.data).toMatchObject({ code, httpStatus: status });
    expect(shop.requests).toHaveLength(1);
    expect(delays).toEqual([]);
    expect(events.at(-1)).toEqual({ type: 'response', ok: false, replayed: false, status });

    // The same key again: the stored business error is replayed, still not retried.
    events.length = 0;
    const replayed = await failure(client.checkout.placeOrder.mutate(anOrder, { context }));
    expect(replayed.data?.httpStatus).toBe(status);
    expect(events.at(-1)).toEqual({ type: 'response', ok: false, replayed: true, status });
    expect(shop.requests).toHaveLength(2);
  });

  it('does not retry a validation error (400)', async () => {
    const { shop, client, context } = setup();
    const invalid = { ...anOrder, items: [{ sku: 'TEA', quantity: 0 }] };
    const error = await failure(client.checkout.placeOrder.mutate(invalid, { context }));
    expect(error.data?.httpStatus).toBe(400);
    expect(shop.requests).toHaveLength(1);
  });

  it('honours Retry-After in delta-seconds on a 409 (instead of the backoff)', async () => {
    const { shop, client, delays, events, context } = setup({}, { retryAfter: '2' });
    shop.faults.push(409);

    await expect(client.checkout.placeOrder.mutate(anOrder, { context })).resolves.toMatchObject({ id: 1 });

    expect(delays).toEqual([2000]);
    expect(events[1]).toMatchObject({ type: 'retrying', attempt: 1, delayMs: 2000, reason: 'in-progress' });
    expect(shop.requests).toHaveLength(2);
  });

  it('honours Retry-After as an HTTP-date, against its clock', async () => {
    const now = Date.UTC(2026, 0, 15, 12, 0, 0);
    const { shop, client, delays, context } = setup(
      { now: () => now },
      { retryAfter: new Date(now + 3000).toUTCString() },
    );
    shop.faults.push(409, 409);

    await client.checkout.placeOrder.mutate(anOrder, { context });

    expect(delays).toEqual([3000, 3000]);
  });

  it('caps Retry-After at maxRetryAfterMs', async () => {
    const { shop, client, delays, context } = setup({ maxRetryAfterMs: 1500 }, { retryAfter: '3600' });
    shop.faults.push(409);
    await client.checkout.placeOrder.mutate(anOrder, { context });
    expect(delays).toEqual([1500]);
  });

  it('never retries a mutation without a key', async () => {
    const { shop, client, delays } = setup();
    shop.faults.push(503);
    const error = await failure(client.checkout.subscribeNewsletter.mutate({ email: 'a@example.com' }));
    expect(error.data?.httpStatus).toBe(503);
    shop.faults.push('drop-response');
    await failure(client.checkout.subscribeNewsletter.mutate({ email: 'a@example.com' }));
    expect(shop.requestsTo('checkout.subscribeNewsletter')).toHaveLength(2);
    // Not even an idempotent procedure: without its key a re-send could run it twice.
    shop.faults.push(503, 'drop-request');
    await failure(client.checkout.placeOrder.mutate(anOrder));
    await failure(client.checkout.placeOrder.mutate(anOrder));
    expect(shop.requestsTo('checkout.placeOrder')).toHaveLength(2);
    expect(delays).toEqual([]);
  });

  it('control for the above: the same faults, with a key, are retried', async () => {
    const { shop, client, delays, context } = setup();
    shop.faults.push(503, 'drop-request');
    await client.checkout.placeOrder.mutate(anOrder, { context });
    expect(shop.requestsTo('checkout.placeOrder')).toHaveLength(3);
    expect(delays).toHaveLength(2);
  });

  describe('requireKeyFor: an idempotent mutation without its key', () => {
    it('control: without it, the unkeyed call leaves and reaches the server', async () => {
      const { shop, client } = setup();
      const error = await failure(client.checkout.placeOrder.mutate(anOrder));
      expect(shop.requestsTo('checkout.placeOrder')).toHaveLength(1);
      expect(error.data?.httpStatus).toBe(400);
    });

    it('fails before the request leaves, with a clear, final error; keyed and plain calls are untouched', async () => {
      const { shop, client, context, delays } = setup({ requireKeyFor: { 'checkout.placeOrder': true } });

      const missing = await failure(client.checkout.placeOrder.mutate(anOrder));
      const unusable = await failure(
        client.checkout.placeOrder.mutate(anOrder, { context: { idempotencyKey: 'ключ' } }),
      );
      expect(shop.requestsTo('checkout.placeOrder')).toHaveLength(0);
      for (const error of [missing, unusable]) {
        expect(error.cause).toBeInstanceOf(MissingIdempotencyKeyError);
        expect(error.message).toMatch(/^checkout\.placeOrder is idempotent: call it with a key/);
        // Nothing a retry would change: a retrying caller must not take it for a lost response.
        expect(classifyFailure(error)).toBe('final');
      }

      await client.checkout.placeOrder.mutate(anOrder, { context });
      expect(await client.checkout.subscribeNewsletter.mutate({ email: 'a@example.com' })).toBe('ok');
      expect(shop.requestsTo('checkout.placeOrder')).toHaveLength(1);
      expect(delays).toEqual([]);
    });

    it('is typed from the router: every idempotent path, and no other', () => {
      expectTypeOf<IdempotentProcedurePath<FakeShopRouter>>().toEqualTypeOf<'checkout.placeOrder'>();
      // @ts-expect-error the idempotent checkout.placeOrder is missing
      idempotentRetryLink<FakeShopRouter>({ requireKeyFor: {} });
      idempotentRetryLink<FakeShopRouter>({
        // @ts-expect-error a plain mutation is not idempotent
        requireKeyFor: { 'checkout.placeOrder': true, 'checkout.subscribeNewsletter': true },
      });
      expect(
        typeof idempotentRetryLink<FakeShopRouter>({ requireKeyFor: { 'checkout.placeOrder': true } }),
      ).toBe('function');
    });
  });

  it('never retries a query, even with a key in its context', async () => {
    const { shop, client, delays, context } = setup();
    shop.faults.push(503);
    await failure(client.checkout.ping.query(undefined, { context }));
    expect(shop.queries).toBe(1);
    expect(delays).toEqual([]);
  });

  it('leaves an unusable key alone (no retry of a request fetch cannot even send)', async () => {
    const { shop, client, delays } = setup();
    shop.faults.push(503);
    await failure(client.checkout.placeOrder.mutate(anOrder, { context: { idempotencyKey: 'ключ' } }));
    expect(delays).toEqual([]);
  });

  it('stops waiting and fails when the caller aborts', async () => {
    const shop = createFakeShop();
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink({ baseDelayMs: 60_000, random: () => 1 }), shop.terminatingLink()],
    });
    const controller = new AbortController();
    const events: RetryLinkEvent[] = [];
    shop.faults.push(503);

    const call = client.checkout.placeOrder.mutate(anOrder, {
      signal: controller.signal,
      context: {
        idempotencyKey: randomUUID(),
        idempotencyObserver: (event: RetryLinkEvent) => events.push(event),
      },
    });
    await expect.poll(() => events.some((event) => event.type === 'retrying')).toBe(true);
    controller.abort();

    const error = await failure(call);
    expect(error.cause?.name).toBe('AbortError');
    expect(shop.requests).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(shop.requests).toHaveLength(1);
  });

  it('waits with real timers by default', async () => {
    const shop = createFakeShop();
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink({ baseDelayMs: 5 }), shop.terminatingLink()],
    });
    shop.faults.push('drop-request', 503);
    await expect(
      client.checkout.placeOrder.mutate(anOrder, { context: { idempotencyKey: randomUUID() } }),
    ).resolves.toMatchObject({ id: 1 });
    expect(shop.requests).toHaveLength(3);
  });

  it('a throwing observer does not change the outcome', async () => {
    const { shop, client } = setup();
    shop.faults.push('drop-request');
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    const observer = () => {
      throw new Error('observer bug');
    };
    try {
      await expect(
        client.checkout.placeOrder.mutate(anOrder, {
          context: { idempotencyKey: randomUUID(), idempotencyObserver: observer },
        }),
      ).resolves.toMatchObject({ id: 1 });
      expect(logged).toHaveBeenCalledTimes(4); // attempt, retrying, attempt, response
    } finally {
      logged.mockRestore();
    }
    expect(shop.requests).toHaveLength(2);
  });
});
