/**
 * idempotentRetryLink end to end over HTTP: a real tRPC client (retry link + httpLink with a `fetch` stub) in
 * front of a real tRPC router served by `fetchRequestHandler`, which emulates the idempotency contract.
 */
import { randomUUID } from 'node:crypto';
import { getEventListeners } from 'node:events';
import {
  createTRPCClient,
  type Operation,
  type OperationResultEnvelope,
  TRPCClientError,
  type TRPCClientRuntime,
  type TRPCLink,
} from '@trpc/client';
import { type Observer, observable } from '@trpc/server/observable';
import { afterEach, beforeEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import {
  abortableSleep,
  classifyFailure,
  getIdempotencyObserver,
  IdempotencyOutcomeUnknownError,
  type IdempotentProcedurePath,
  type IdempotentRetryLinkOptions,
  idempotentRetryLink,
  isIdempotencyOutcomeUnknown,
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

/**
 * Whether `promise` has settled once every callback already due has run (microtasks, then one turn of the event
 * loop): tells "ended at once" from "still waiting" without measuring time.
 */
async function stateNow(promise: Promise<unknown>): Promise<'resolved' | 'rejected' | 'pending'> {
  const pending = new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending')));
  return Promise.race([
    promise.then(
      () => 'resolved' as const,
      () => 'rejected' as const,
    ),
    pending,
  ]);
}

/** A terminating link whose every request fails with `error`, as a transport other than fetch may. */
function failingLink(error: unknown): TRPCLink<FakeShopRouter> {
  return () => () =>
    observable((observer) => {
      observer.error(error as TRPCClientError<FakeShopRouter>);
    });
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
      { type: 'attempt', attempt: 1, maxAttempts: 8 },
      { type: 'retrying', attempt: 1, delayMs: 500, reason: 'network', error: expect.anything() },
      { type: 'attempt', attempt: 2, maxAttempts: 8 },
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

  it('stops at maxAttempts and fails as outcome unknown, with the key, the attempts and the last error', async () => {
    const { shop, client, delays, events, key, context } = setup({ maxAttempts: 3 });
    shop.faults.push(503, 503, 503, 503);

    const error = await failure(client.checkout.placeOrder.mutate(anOrder, { context }));

    expect(error).toBeInstanceOf(TRPCClientError);
    expect(isIdempotencyOutcomeUnknown(error)).toBe(true);
    expect(error.cause).toBeInstanceOf(IdempotencyOutcomeUnknownError);
    expect(error.cause).toMatchObject({
      name: 'IdempotencyOutcomeUnknownError',
      key,
      path: 'checkout.placeOrder',
      attempts: 3,
      reason: 'server-error',
    });
    expect(error.message).toBe(
      'Outcome unknown: checkout.placeOrder got no answer in 3 attempts (last: provider down). ' +
        'Retry with the same idempotency key: the server runs it at most once.',
    );
    // The last attempt's error, and what was read from it, as it was.
    expect((error.cause as Error).cause).toMatchObject({
      name: 'TRPCClientError',
      data: { httpStatus: 503 },
    });
    expect(error.data?.httpStatus).toBe(503);
    expect(error.meta?.response).toBeInstanceOf(Response);
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
    const error = await failure(client.checkout.placeOrder.mutate(anOrder, { context }));
    expect(shop.requests).toHaveLength(1);
    expect(error.cause).toMatchObject({ attempts: 1, reason: 'network' });
    expect(error.message).toMatch(
      /^Outcome unknown: checkout\.placeOrder got no answer in 1 attempt \(last: fetch failed\)/,
    );
  });

  // The server decided: a final answer after earlier attempts got none is that answer, not "unknown" — the same
  // key got it, so it is the outcome (a replay, or the first decision on the key).
  it.each([402, 422] as const)(
    'a final %s after lost attempts is the server’s answer, not outcome unknown',
    async (status) => {
      const { shop, client, events, context } = setup();
      shop.faults.push('drop-request', 503, status);

      const error = await failure(client.checkout.placeOrder.mutate(anOrder, { context }));

      expect(error.data?.httpStatus).toBe(status);
      expect(isIdempotencyOutcomeUnknown(error)).toBe(false);
      expect(error.cause).not.toBeInstanceOf(IdempotencyOutcomeUnknownError);
      expect(events.at(-1)).toEqual({ type: 'response', ok: false, replayed: false, status });
    },
  );

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

  it('isIdempotencyOutcomeUnknown: the call’s error with that cause, by class or by name; nothing else', () => {
    const cause = new IdempotencyOutcomeUnknownError(
      { key: 'k-1', path: 'checkout.placeOrder', attempts: 2, reason: 'network' },
      { cause: new TypeError('fetch failed') },
    );
    expect(isIdempotencyOutcomeUnknown(new TRPCClientError(cause.message, { cause }))).toBe(true);
    // Another copy of the package in the bundle: another class, the same names.
    const copy = { name: 'IdempotencyOutcomeUnknownError', key: 'k-1', attempts: 2 };
    expect(isIdempotencyOutcomeUnknown({ name: 'TRPCClientError', cause: copy })).toBe(true);
    expect(isIdempotencyOutcomeUnknown(cause)).toBe(false);
    expect(isIdempotencyOutcomeUnknown(TRPCClientError.from(new TypeError('fetch failed')))).toBe(false);
    expect(
      isIdempotencyOutcomeUnknown({
        name: 'TRPCClientError',
        cause: { name: 'IdempotencyOutcomeUnknownError' },
      }),
    ).toBe(false);
    expect(isIdempotencyOutcomeUnknown(null)).toBe(false);
  });

  it('does not retry a validation error (400)', async () => {
    const { shop, client, context } = setup();
    const invalid = { ...anOrder, items: [{ sku: 'TEA', quantity: 0 }] };
    const error = await failure(client.checkout.placeOrder.mutate(invalid, { context }));
    expect(error.data?.httpStatus).toBe(400);
    expect(shop.requests).toHaveLength(1);
  });

  it('honours Retry-After in delta-seconds on a 409 (longer than the backoff)', async () => {
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

  // A server that answers every attempt with a short Retry-After (409 here; a 503 of a restarting store alike)
  // must not shrink the retries to a few seconds in all: the backoff's wait stands when it is longer.
  it('takes Retry-After as the least wait: the backoff still applies when longer', async () => {
    const { shop, client, delays, context } = setup({}, { retryAfter: '1' });
    shop.faults.push(409, 409, 409, 409, 409, 409, 409);

    await expect(client.checkout.placeOrder.mutate(anOrder, { context })).resolves.toMatchObject({ id: 1 });

    expect(delays).toEqual([1000, 1000, 2000, 4000, 5000, 5000, 5000]);
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
        // By its name too: where instanceof fails (two copies of the package in one bundle) and in logs.
        expect(error.cause?.name).toBe('MissingIdempotencyKeyError');
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

  // The README's "Watching retries" link: a link before the retry link chains the observer already in the
  // context (the hook's), and both hear every event.
  it('a link before it can watch a keyed mutation beside the observer already in its context', async () => {
    const shop = createFakeShop();
    const reported: Array<[string, RetryLinkEvent]> = [];
    const watchRetries =
      (report: (path: string, event: RetryLinkEvent) => void): TRPCLink<FakeShopRouter> =>
      () =>
      ({ op, next }) => {
        if (op.type !== 'mutation') return next(op);
        const inner = getIdempotencyObserver(op.context);
        const idempotencyObserver = (event: RetryLinkEvent) => {
          inner?.(event);
          report(op.path, event);
        };
        return next({ ...op, context: { ...op.context, idempotencyObserver } });
      };
    const client = createTRPCClient<FakeShopRouter>({
      links: [
        watchRetries((path, event) => reported.push([path, event])),
        idempotentRetryLink<FakeShopRouter>({ sleep: recordingSleep().sleep, random: () => 1 }),
        shop.terminatingLink(),
      ],
    });
    const inner: RetryLinkEvent[] = [];
    shop.faults.push('drop-request');

    await client.checkout.placeOrder.mutate(anOrder, {
      context: {
        idempotencyKey: randomUUID(),
        idempotencyObserver: (event: RetryLinkEvent) => inner.push(event),
      },
    });
    await client.checkout.placeOrder.mutate(anOrder, { context: { idempotencyKey: randomUUID() } });

    const first: RetryLinkEvent[] = [
      { type: 'attempt', attempt: 1, maxAttempts: 8 },
      { type: 'retrying', attempt: 1, delayMs: 500, reason: 'network', error: expect.anything() },
      { type: 'attempt', attempt: 2, maxAttempts: 8 },
      { type: 'response', ok: true, replayed: false, status: 200 },
    ];
    expect(inner).toEqual(first);
    expect(reported).toEqual([
      ...first.map((event) => ['checkout.placeOrder', event]),
      ['checkout.placeOrder', { type: 'attempt', attempt: 1, maxAttempts: 8 }],
      ['checkout.placeOrder', { type: 'response', ok: true, replayed: false, status: 200 }],
    ]);
  });

  it('a throwing observer does not change the outcome', async () => {
    const { shop, client } = setup();
    shop.faults.push('drop-request');
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    const bug = new Error('observer bug');
    const observer = () => {
      throw bug;
    };
    try {
      await expect(
        client.checkout.placeOrder.mutate(anOrder, {
          context: { idempotencyKey: randomUUID(), idempotencyObserver: observer },
        }),
      ).resolves.toMatchObject({ id: 1 });
      expect(logged).toHaveBeenCalledTimes(4); // attempt, retrying, attempt, response
      // The log says whose bug it is, and carries the observer's own error.
      expect(logged).toHaveBeenCalledWith('idempotentRetryLink: idempotencyObserver threw', bug);
    } finally {
      logged.mockRestore();
    }
    expect(shop.requests).toHaveLength(2);
  });
});

describe('idempotentRetryLink: what it reports, and an abort during the backoff', () => {
  beforeEach(() => {
    // Only the backoff's timer is faked; setImmediate (stateNow) and the fake shop's promises stay real.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** The fake shop behind the link with its default (timer) sleep; `retrying` resolves when a backoff starts. */
  function waitingSetup(linkOptions: IdempotentRetryLinkOptions<FakeShopRouter> = {}) {
    const shop = createFakeShop();
    const client = createTRPCClient<FakeShopRouter>({
      links: [
        idempotentRetryLink<FakeShopRouter>({ random: () => 1, ...linkOptions }),
        shop.terminatingLink(),
      ],
    });
    const controller = new AbortController();
    let backoffStarted: () => void = () => {};
    const retrying = new Promise<void>((resolve) => {
      backoffStarted = resolve;
    });
    const context = {
      idempotencyKey: randomUUID(),
      idempotencyObserver: (event: RetryLinkEvent) => {
        if (event.type === 'retrying') backoffStarted();
      },
    };
    shop.faults.push(503);
    const call = client.checkout.placeOrder.mutate(anOrder, { signal: controller.signal, context });
    return { shop, controller, call, retrying };
  }

  // The user leaves the checkout (or the app cancels) while the link waits out a 503's backoff: the call must end
  // now, with the reason the app gave — not after the backoff, and without sending the order once more.
  // The app's reason is any Error: the call still ends as an abort (a caller that retries on `classifyFailure`
  // must not re-send what the user cancelled), carrying that reason and its message.
  it('an abort during the backoff ends the call at once as an abort with its Error reason; the timer is cleared, no attempt follows', async () => {
    const { shop, controller, call, retrying } = waitingSetup();
    await retrying;
    const reason = new Error('the user left the checkout');
    controller.abort(reason);

    expect(await stateNow(call)).toBe('rejected');
    const error = await failure(call);
    expect(error.cause).toMatchObject({ name: 'AbortError', message: 'the user left the checkout' });
    expect((error.cause as Error).cause).toBe(reason);
    expect(classifyFailure(error)).toBe('final');
    expect(vi.getTimerCount()).toBe(0);
    // Had a timer survived the abort, running it now would send attempt 2.
    vi.runAllTimers();
    await new Promise((resolve) => setImmediate(resolve));
    expect(shop.requests).toHaveLength(1);
  });

  // `controller.abort('navigated')` is legal: the app still gets an Error it can recognise as an abort (and
  // that a retrying caller classifies as final), not a string thrown through tRPC.
  it('an abort with a non-Error reason fails the call with an AbortError "Aborted"', async () => {
    const { shop, controller, call, retrying } = waitingSetup();
    await retrying;
    controller.abort('navigated');

    expect(await stateNow(call)).toBe('rejected');
    const error = await failure(call);
    expect(error.cause).toBeInstanceOf(Error);
    expect(error.cause).toMatchObject({ name: 'AbortError', message: 'Aborted' });
    expect(error.message).toBe('Aborted');
    expect(classifyFailure(error)).toBe('final');
    expect(shop.requests).toHaveLength(1);
  });

  // A custom `sleep` may resolve (instead of reject) when its signal aborts, as the option allows: the link
  // must still end the call with the abort, not take the early wake-up as "time to send the next attempt".
  it('a custom sleep that resolves early on abort: the call ends with the abort, nothing more is sent', async () => {
    const sleep = (_ms: number, signal: AbortSignal) =>
      new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    const { shop, controller, call, retrying } = waitingSetup({ sleep });
    await retrying;
    const reason = new Error('cancelled');
    controller.abort(reason);

    expect(await stateNow(call)).toBe('rejected');
    const error = await failure(call);
    expect(error.cause).toMatchObject({ name: 'AbortError', cause: reason });
    expect(classifyFailure(error)).toBe('final');
    expect(shop.requests).toHaveLength(1);
  });

  // Over a transport without an HTTP Response (wsLink: the status is only in the error's data) a final error is
  // still the server's answer: the observer hears `response` with its status, e.g. to show "card declined".
  it('reports a final error known only by its status (no Response) as the server’s answer', async () => {
    const declined = TRPCClientError.from({
      error: { code: -32000, message: 'Card declined', data: { code: 'PAYMENT_REQUIRED', httpStatus: 402 } },
    });
    const events: RetryLinkEvent[] = [];
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink<FakeShopRouter>(), failingLink(declined)],
    });
    const context = {
      idempotencyKey: randomUUID(),
      idempotencyObserver: (event: RetryLinkEvent) => events.push(event),
    };

    expect(await failure(client.checkout.placeOrder.mutate(anOrder, { context }))).toBe(declined);
    expect(events).toEqual([
      { type: 'attempt', attempt: 1, maxAttempts: 8 },
      { type: 'response', ok: false, replayed: false, status: 402 },
    ]);
  });

  // A custom transport may hand over a response-like without a numeric status (only its headers): the final
  // error is still the server's answer — reported as a response, `replayed` read from its headers.
  it('reports a final error whose response has no status as the server’s answer, replayed from its headers', async () => {
    const declined = TRPCClientError.from(
      { error: { code: -32000, message: 'Card declined', data: { code: 'PAYMENT_REQUIRED' } } },
      { meta: { response: { headers: new Headers({ 'Idempotent-Replayed': 'true' }) } } },
    );
    const events: RetryLinkEvent[] = [];
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink<FakeShopRouter>(), failingLink(declined)],
    });
    const context = {
      idempotencyKey: randomUUID(),
      idempotencyObserver: (event: RetryLinkEvent) => events.push(event),
    };

    expect(await failure(client.checkout.placeOrder.mutate(anOrder, { context }))).toBe(declined);
    expect(events).toEqual([
      { type: 'attempt', attempt: 1, maxAttempts: 8 },
      { type: 'response', ok: false, replayed: true, status: undefined },
    ]);
  });

  // …and a failure that got no answer at all and is not retried (the request's own timeout signal fired) is
  // not reported as a response: the app must not show it as the server's verdict.
  it('does not report a response for a final failure that got no answer (a timeout)', async () => {
    const timedOut = TRPCClientError.from(new DOMException('The operation timed out.', 'TimeoutError'));
    const events: RetryLinkEvent[] = [];
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink<FakeShopRouter>(), failingLink(timedOut)],
    });
    const context = {
      idempotencyKey: randomUUID(),
      idempotencyObserver: (event: RetryLinkEvent) => events.push(event),
    };

    expect(await failure(client.checkout.placeOrder.mutate(anOrder, { context }))).toBe(timedOut);
    expect(events).toEqual([{ type: 'attempt', attempt: 1, maxAttempts: 8 }]);
  });

  // A context assembled by app code may carry something that is not a function under idempotencyObserver: it is
  // no observer — the call works, and nothing is logged on every event as if an observer had thrown.
  it('ignores an idempotencyObserver that is not a function', async () => {
    vi.useRealTimers();
    const { shop, client } = setup();
    shop.faults.push('drop-request');
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      await expect(
        client.checkout.placeOrder.mutate(anOrder, {
          context: { idempotencyKey: randomUUID(), idempotencyObserver: 'console.log' },
        }),
      ).resolves.toMatchObject({ id: 1 });
      expect(logged).not.toHaveBeenCalled();
    } finally {
      logged.mockRestore();
    }
    expect(shop.requests).toHaveLength(2);
  });
});

describe('abortableSleep (the link’s default wait)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  // One AbortController often outlives many requests (a page's, a component's): every wait must take its
  // listener off again, or they pile up on the signal for as long as it lives.
  it('resolves after its delay and leaves no listener on the signal', async () => {
    const controller = new AbortController();
    const sleep = abortableSleep(5000, controller.signal);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);

    vi.advanceTimersByTime(4999);
    expect(await stateNow(sleep)).toBe('pending');
    vi.advanceTimersByTime(1);
    expect(await stateNow(sleep)).toBe('resolved');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('an abort ends it at once as an AbortError carrying the Error reason, clears its timer, and leaves no listener', async () => {
    const controller = new AbortController();
    const sleep = abortableSleep(60_000, controller.signal);
    const reason = new Error('stop');
    controller.abort(reason);

    expect(await stateNow(sleep)).toBe('rejected');
    const error: unknown = await sleep.catch((caught: unknown) => caught);
    expect(error).toMatchObject({ name: 'AbortError', message: 'stop', cause: reason });
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('an abort with a non-Error reason rejects with an AbortError "Aborted"', async () => {
    const controller = new AbortController();
    const sleep = abortableSleep(60_000, controller.signal);
    controller.abort(42);

    expect(await stateNow(sleep)).toBe('rejected');
    const error: unknown = await sleep.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({ name: 'AbortError', message: 'Aborted' });
  });

  // The standard reasons are aborts already: passed on as they are.
  it.each([
    ['controller.abort()', () => AbortSignal.abort()],
    ['AbortSignal.timeout', () => AbortSignal.abort(new DOMException('timed out', 'TimeoutError'))],
  ])('%s: its own reason, as it is', async (_name, makeSignal) => {
    const signal = makeSignal();
    const error: unknown = await abortableSleep(60_000, signal).catch((caught: unknown) => caught);
    expect(error).toBe(signal.reason);
  });

  // The caller may abort before the link even starts to wait: the wait must not start at all.
  it('a signal aborted before the wait ends it at once: no timer, no listener', async () => {
    const reason = new Error('already cancelled');
    const signal = AbortSignal.abort(reason);
    const sleep = abortableSleep(60_000, signal);

    expect(await stateNow(sleep)).toBe('rejected');
    await expect(sleep).rejects.toMatchObject({ name: 'AbortError', cause: reason });
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});

/** An attempt the link sent, still open until the test answers it. */
type OpenAttempt = {
  observer: Observer<OperationResultEnvelope<unknown, TRPCClientError<never>>, TRPCClientError<never>>;
  unsubscribed: boolean;
};

/**
 * The link on its own, as the next link (or tRPC's client) subscribes to it: a terminating link whose every
 * attempt stays open until the test answers it (`attempts[i].observer`), and a consumer that records what it gets.
 */
function linkAlone(
  options: IdempotentRetryLinkOptions = {},
  opOverrides: Partial<Pick<Operation, 'type' | 'path' | 'signal'>> & { context?: Operation['context'] } = {},
) {
  const attempts: OpenAttempt[] = [];
  const events: RetryLinkEvent[] = [];
  const received: unknown[][] = [];
  const op: Operation = {
    id: 1,
    type: 'mutation',
    path: 'checkout.placeOrder',
    input: anOrder,
    context: {
      idempotencyKey: randomUUID(),
      idempotencyObserver: (event: RetryLinkEvent) => events.push(event),
    },
    signal: null,
    ...opOverrides,
  };
  const sent: Operation[] = [];
  const subscription = idempotentRetryLink({ random: () => 1, ...options })({} as TRPCClientRuntime)({
    op,
    next: (sentOp) =>
      observable((observer) => {
        sent.push(sentOp);
        const attempt = { observer, unsubscribed: false };
        attempts.push(attempt);
        return () => {
          attempt.unsubscribed = true;
        };
      }),
  }).subscribe({
    next: (envelope) => received.push(['next', envelope]),
    error: (error) => received.push(['error', error]),
    complete: () => received.push(['complete']),
  });
  return { attempts, events, received, sent, subscription };
}

const unavailable = () =>
  TRPCClientError.from({
    error: { code: -32603, message: 'Unavailable', data: { code: 'INTERNAL_SERVER_ERROR', httpStatus: 503 } },
  });
const declinedCard = () =>
  TRPCClientError.from({
    error: { code: -32000, message: 'Card declined', data: { code: 'PAYMENT_REQUIRED', httpStatus: 402 } },
  });
const tooMany = () =>
  TRPCClientError.from({
    error: { code: -32029, message: 'Too many', data: { code: 'TOO_MANY_REQUESTS', httpStatus: 429 } },
  });
const lost = () => TRPCClientError.from(new TypeError('fetch failed'));
const anEnvelope = { result: { type: 'data' as const, data: { id: 1 } } };

/** `value[name]`, for what the link hands its consumer as `unknown`. */
const property = (value: unknown, name: string): unknown =>
  value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[name] : undefined;

/** Lets every callback already due run (microtasks, then one turn of the event loop). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('idempotentRetryLink as an observable (what the next link, or tRPC, subscribes to)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  // A consumer other than tRPC's promise (a link after it, a subscription-style observer) learns the call is
  // over from `complete`: it must come, after the result.
  it('passes the result and then the completion on to its consumer', () => {
    const { attempts, received } = linkAlone();
    attempts[0]?.observer.next(anEnvelope);
    attempts[0]?.observer.complete();
    expect(received).toEqual([['next', anEnvelope], ['complete']]);
  });

  // The consumer left (a React component unmounted) while the request was out; a transport may still deliver
  // its answer. It must reach no one: not the consumer, not the observer as a "response".
  it('after the consumer unsubscribes, a late answer of the abandoned attempt reaches no one', () => {
    const { attempts, events, received, subscription } = linkAlone();
    subscription.unsubscribe();
    expect(attempts[0]?.unsubscribed).toBe(true);

    attempts[0]?.observer.next(anEnvelope);
    attempts[0]?.observer.complete();
    expect(received).toEqual([]);
    expect(events).toEqual([{ type: 'attempt', attempt: 1, maxAttempts: 8 }]);
  });

  // …and a late retryable failure of that attempt must not start a retry nobody is waiting for.
  it('after the consumer unsubscribes, a late retryable failure starts no retry', async () => {
    const sleep = vi.fn(() => Promise.resolve());
    const { attempts, events, received, sent, subscription } = linkAlone({ sleep });
    subscription.unsubscribe();

    attempts[0]?.observer.error(unavailable());
    await settle();
    expect(sleep).not.toHaveBeenCalled();
    expect(sent).toHaveLength(1);
    expect(received).toEqual([]);
    expect(events).toEqual([{ type: 'attempt', attempt: 1, maxAttempts: 8 }]);
  });

  // Unsubscribing is how tRPC and React Query cancel without an AbortSignal: the backoff must end with it —
  // no timer left, no attempt sent later, nothing delivered to a consumer that has gone.
  it('unsubscribing during the backoff ends the wait: its timer cleared, nothing more sent or delivered', async () => {
    const { attempts, events, received, sent, subscription } = linkAlone();
    attempts[0]?.observer.error(unavailable());
    expect(events.at(-1)).toMatchObject({ type: 'retrying', attempt: 1, delayMs: 500 });
    expect(vi.getTimerCount()).toBe(1);

    subscription.unsubscribe();
    expect(vi.getTimerCount()).toBe(0);
    await settle();
    vi.runAllTimers();
    await settle();
    expect(sent).toHaveLength(1);
    expect(received).toEqual([]);
  });

  // A custom `sleep` may fail on its own (no timers where it runs, a bug): the call must end — as outcome unknown,
  // caused by the failure it was about to retry — rather than hang, also when the caller gave no signal.
  it('a sleep that fails ends the call with the failure it was waiting to retry (no signal given)', async () => {
    const failure503 = unavailable();
    const { attempts, received, sent } = linkAlone({
      sleep: () => Promise.reject(new Error('no timers here')),
    });
    attempts[0]?.observer.error(failure503);
    await settle();
    expect(received).toHaveLength(1);
    const [kind, error] = received[0] ?? [];
    expect(kind).toBe('error');
    expect(isIdempotencyOutcomeUnknown(error)).toBe(true);
    expect(property(error, 'cause')).toMatchObject({
      attempts: 1,
      reason: 'server-error',
      cause: failure503,
    });
    expect(sent).toHaveLength(1);
  });

  // 429: refused before anything ran, nothing stored. When every attempt got one, the outcome is known — not run
  // — and the last 429 is the error; one lost attempt before them makes the outcome unknown again.
  it.each([
    ['only 429s: the last 429, as it is', [tooMany, tooMany], false],
    ['a lost attempt, then 429s: outcome unknown', [lost, tooMany], true],
  ] as const)('retries ending on %s', async (_name, failures, unknown) => {
    const { attempts, received } = linkAlone({ maxAttempts: 2, sleep: () => Promise.resolve() });
    const errors = failures.map((make) => make());
    for (const [index, error] of errors.entries()) {
      attempts[index]?.observer.error(error);
      await settle();
    }
    const [kind, error] = received[0] ?? [];
    expect(kind).toBe('error');
    expect(isIdempotencyOutcomeUnknown(error)).toBe(unknown);
    if (unknown) expect(property(error, 'cause')).toMatchObject({ attempts: 2, reason: 'throttled' });
    else expect(error).toBe(errors.at(-1));
  });

  // One AbortController often serves a whole page: each call must take its listener off the signal when it ends,
  // or they pile up for as long as the page lives.
  it.each([
    [
      'a result',
      (attempt: OpenAttempt) => {
        attempt.observer.next(anEnvelope);
        attempt.observer.complete();
      },
    ],
    [
      'a final failure',
      (attempt: OpenAttempt) => {
        attempt.observer.error(declinedCard());
      },
    ],
  ])('leaves no listener on the caller’s signal once the call ends with %s', (_name, end) => {
    const controller = new AbortController();
    const { attempts, received } = linkAlone({}, { signal: controller.signal });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    const [attempt] = attempts;
    if (attempt === undefined) throw new Error('no attempt was sent');
    end(attempt);
    expect(received.length).toBeGreaterThan(0);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('leaves no listener on the caller’s signal when the consumer unsubscribes during the backoff', async () => {
    const controller = new AbortController();
    const { attempts, subscription } = linkAlone({}, { signal: controller.signal });
    attempts[0]?.observer.error(unavailable());
    subscription.unsubscribe();
    await settle();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  // `requireKeyFor` is about mutations: a query (or subscription) to a listed path — possible from untyped code —
  // passes through as any query does, never refused for a key it does not need.
  it.each(['query', 'subscription'] as const)(
    'requireKeyFor holds back only mutations: a %s without a key passes',
    (type) => {
      const { sent, received } = linkAlone(
        { requireKeyFor: { 'checkout.placeOrder': true } },
        { type, context: {} },
      );
      expect(sent).toHaveLength(1);
      expect(received).toEqual([]);
    },
  );
});
