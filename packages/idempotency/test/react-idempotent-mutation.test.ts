// @vitest-environment happy-dom
/**
 * useIdempotentMutation on TanStack Query + @trpc/tanstack-react-query, over a real tRPC client
 * (idempotentRetryLink + httpLink) talking HTTP to a router that emulates the idempotency contract.
 */
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { act, cleanup, renderHook } from '@testing-library/react';
import { createTRPCClient, type TRPCLink } from '@trpc/client';
import { observable } from '@trpc/server/observable';
import { createTRPCOptionsProxy } from '@trpc/tanstack-react-query';
import { createElement, type ReactNode } from 'react';
import { renderToString } from 'react-dom/server';
import superjson from 'superjson';
import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import {
  type IdempotentRetryLinkOptions,
  idempotentRetryLink,
  isIdempotencyOutcomeUnknown,
} from '../src/client/index.ts';
import {
  type IdempotentMutationState,
  type IdempotentRequestOptions,
  jsonSerializer,
  type KeyValueStorage,
  type UseIdempotentMutationOptions,
  useIdempotentMutation,
} from '../src/react/index.ts';
import { ALIVE_STALE_MS } from '../src/react/intent-store.ts';
import {
  anOrder,
  createFakeShop,
  type FakeShopRouter,
  type Order,
  type OrderInput,
  recordingSleep,
} from './client-fake-shop.ts';

afterEach(() => {
  cleanup();
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
});

function tabStorage(): KeyValueStorage {
  const items = new Map<string, string>();
  return {
    getItem: (name) => items.get(name) ?? null,
    setItem: (name, value) => {
      items.set(name, value);
    },
    removeItem: (name) => {
      items.delete(name);
    },
  };
}

function setup({ link = true, ...linkOptions }: IdempotentRetryLinkOptions & { link?: boolean } = {}) {
  const shop = createFakeShop();
  const { delays, sleep } = recordingSleep();
  const queryClient = new QueryClient({ defaultOptions: { mutations: { retry: false } } });
  const client = createTRPCClient<FakeShopRouter>({
    links: link
      ? [idempotentRetryLink({ sleep, random: () => 1, ...linkOptions }), shop.terminatingLink()]
      : [shop.terminatingLink()],
  });
  const trpc = createTRPCOptionsProxy<FakeShopRouter>({ client, queryClient });
  const storage = tabStorage();
  const wrapper = ({ children }: { children: ReactNode }) =>
    createElement(QueryClientProvider, { client: queryClient }, children);
  const onSuccess = vi.fn();

  /** The app's usage; `render` again with the same storage = a reload of the tab. */
  const render = (options: Partial<UseIdempotentMutationOptions> = {}) =>
    renderHook(
      () =>
        useIdempotentMutation(
          (request) => trpc.checkout.placeOrder.mutationOptions({ ...request, onSuccess }),
          {
            intentId: 'checkout',
            storage,
            ...options,
          },
        ),
      { wrapper },
    );
  return { shop, delays, render, onSuccess, storage, trpc, wrapper };
}

type Result = ReturnType<ReturnType<typeof setup>['render']>['result'];

async function submit(result: Result, input: OrderInput) {
  let outcome: IdempotentMutationState<unknown, unknown, OrderInput> | undefined;
  await act(async () => {
    outcome = await result.current.submit(input);
  });
  if (!outcome) throw new Error('submit did not settle');
  return outcome;
}

const edited: OrderInput = { items: [{ sku: 'COFFEE', quantity: 3 }], email: 'b@example.com' };

describe('useIdempotentMutation', () => {
  it('sends with the intent key, succeeds, and retires the key', async () => {
    const { shop, render, onSuccess } = setup();
    const { result } = render();
    const key = result.current.key;
    expect(key).not.toBeNull();
    expect(result.current.state.status).toBe('idle');

    const outcome = await submit(result, anOrder);

    expect(outcome).toMatchObject({
      status: 'succeeded',
      data: { id: 1 },
      input: anOrder,
      recoveredInDoubt: false,
    });
    expect(result.current.state).toMatchObject({
      status: 'succeeded',
      attempt: 1,
      maxAttempts: 8,
      error: null,
    });
    expect(shop.requests.map((request) => request.key)).toEqual([key]);
    expect(onSuccess).toHaveBeenCalledOnce();
    // A final outcome: the next intent gets a new key.
    expect(result.current.key).not.toBeNull();
    expect(result.current.key).not.toBe(key);
  });

  it('retries a lost response with the same key and reports the replay', async () => {
    const { shop, delays, render } = setup();
    const { result } = render();
    const key = result.current.key;
    shop.faults.push('drop-response');

    const outcome = await submit(result, anOrder);

    expect(outcome).toMatchObject({ status: 'replayed', attempt: 2, data: { id: 1 } });
    expect(shop.executions).toBe(1);
    expect(shop.requests.map((request) => request.key)).toEqual([key, key]);
    expect(delays).toEqual([500]);
  });

  it('shows sending, then retrying with the attempt number', async () => {
    const shop = createFakeShop();
    const releases: Array<() => void> = [];
    const sleep = () => new Promise<void>((resolve) => releases.push(resolve));
    const queryClient = new QueryClient();
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink({ sleep }), shop.terminatingLink()],
    });
    const trpc = createTRPCOptionsProxy<FakeShopRouter>({ client, queryClient });
    const wrapper = ({ children }: { children: ReactNode }) =>
      createElement(QueryClientProvider, { client: queryClient }, children);
    const storage = tabStorage();
    const { result } = renderHook(
      () =>
        useIdempotentMutation((request) => trpc.checkout.placeOrder.mutationOptions(request), {
          intentId: 'x',
          storage,
        }),
      { wrapper },
    );
    shop.faults.push(503);

    let done: Promise<unknown> = Promise.resolve();
    act(() => {
      done = result.current.submit(anOrder);
    });
    expect(result.current.state.status).toBe('sending');
    // The link waits (its sleep is held), and the hook re-renders with what it reported: React commits that
    // render on its own schedule, so the state is awaited too (a loaded machine rendered it later, seen in CI).
    await vi.waitFor(() => {
      expect(releases).toHaveLength(1);
      expect(result.current.state).toMatchObject({ status: 'retrying', attempt: 1 });
    });
    expect(result.current.state.error).toMatchObject({ data: { httpStatus: 503 } });
    await act(async () => {
      releases[0]?.();
      await done;
    });
    expect(result.current.state).toMatchObject({ status: 'succeeded', attempt: 2 });
  });

  it('shares one promise between concurrent submits (one request)', async () => {
    const { shop, render } = setup();
    const { result } = render();

    let first: Promise<unknown> = Promise.resolve();
    let second: Promise<unknown> = Promise.resolve();
    let third: Promise<unknown> = Promise.resolve();
    await act(async () => {
      first = result.current.submit(anOrder);
      second = result.current.submit(anOrder);
      third = result.current.submit(edited);
      await Promise.all([first, second, third]);
    });

    expect(second).toBe(first);
    expect(third).toBe(first);
    expect(shop.requests).toHaveLength(1);
    expect(shop.executions).toBe(1);
  });

  it('a final error fails at once and retires the key', async () => {
    const { shop, delays, render } = setup();
    const { result } = render();
    const key = result.current.key;
    shop.faults.push(402);

    const outcome = await submit(result, anOrder);

    expect(outcome.status).toBe('failed');
    expect(outcome.error).toMatchObject({ message: 'Card declined', data: { httpStatus: 402 } });
    expect(shop.requests).toHaveLength(1);
    expect(delays).toEqual([]);
    expect(result.current.key).not.toBe(key);
    expect(result.current.inDoubt).toBeNull();
  });

  it('exhausted retries leave the outcome unknown, keep the key and show the attempt in doubt', async () => {
    const { shop, render } = setup({ maxAttempts: 3 });
    const { result } = render();
    const key = result.current.key;
    shop.faults.push(503, 503, 503);

    const outcome = await submit(result, anOrder);

    expect(outcome).toMatchObject({ status: 'unknown', attempt: 3, maxAttempts: 3 });
    expect(outcome.error).toMatchObject({ data: { httpStatus: 503 } });
    // What the form can show: the outcome is unknown, and checking again (same key) is safe.
    expect(isIdempotencyOutcomeUnknown(outcome.error)).toBe(true);
    expect(outcome.error).toMatchObject({ cause: { key, attempts: 3 } });
    expect(result.current.key).toBe(key);
    expect(result.current.inDoubt).toEqual({ payload: anOrder, sentAt: expect.any(Number), expired: false });

    // Submitting the same payload again: the same key, a normal retry.
    const retried = await submit(result, anOrder);
    expect(retried).toMatchObject({ status: 'succeeded', recoveredInDoubt: false });
    expect(new Set(shop.requests.map((request) => request.key))).toEqual(new Set([key]));
  });

  it('in doubt + an edited payload: re-sends the ORIGINAL payload with the ORIGINAL key, and says so', async () => {
    const { shop, render } = setup({ maxAttempts: 2 });
    const { result } = render();
    const key = result.current.key;
    shop.faults.push('drop-response', 'drop-response'); // it went through, the client never learned it

    expect((await submit(result, anOrder)).status).toBe('unknown');
    expect(shop.executions).toBe(1);

    const outcome = await submit(result, edited);

    expect(outcome).toMatchObject({
      status: 'replayed',
      recoveredInDoubt: true,
      input: anOrder,
      data: { id: 1 },
    });
    const last = shop.requests.at(-1);
    expect(last).toEqual({ path: 'checkout.placeOrder', key, input: anOrder });
    expect(shop.requests.some((request) => JSON.stringify(request.input) === JSON.stringify(edited))).toBe(
      false,
    );
    expect(shop.executions).toBe(1);
    // Resolved: a new key for the next purchase (which the UI starts only with the user's consent).
    expect(result.current.key).not.toBe(key);
    expect(result.current.inDoubt).toBeNull();
  });

  it('after a reload mid-request, resolves the in-doubt attempt before anything else', async () => {
    const { shop, render } = setup({ maxAttempts: 3 });
    shop.faults.push('drop-response', 'drop-response', 'drop-response');
    const page = render();
    const key = page.result.current.key;
    await submit(page.result, anOrder); // 'unknown'; same state as a reload mid-request
    page.unmount();

    const reloaded = render();
    expect(reloaded.result.current.key).toBe(key);
    expect(reloaded.result.current.state.status).toBe('idle');
    expect(reloaded.result.current.inDoubt?.payload).toEqual(anOrder);

    const outcome = await submit(reloaded.result, edited);
    expect(outcome).toMatchObject({ status: 'replayed', recoveredInDoubt: true, input: anOrder });
    expect(shop.executions).toBe(1);
  });

  it('in doubt and never executed: the re-sent original runs once', async () => {
    const { shop, render } = setup({ maxAttempts: 2 });
    const { result } = render();
    shop.faults.push('drop-request', 'drop-request');
    expect((await submit(result, anOrder)).status).toBe('unknown');
    expect(shop.executions).toBe(0);

    const outcome = await submit(result, edited);
    expect(outcome).toMatchObject({ status: 'succeeded', recoveredInDoubt: true, input: anOrder });
    expect(shop.executions).toBe(1);
  });

  it('reset() starts a new purchase with a new key, even in doubt; refused while in flight', async () => {
    const { shop, render } = setup({ maxAttempts: 1 });
    const { result } = render();
    const key = result.current.key;
    shop.faults.push('drop-response');
    expect((await submit(result, anOrder)).status).toBe('unknown');

    let accepted = false;
    act(() => {
      accepted = result.current.reset();
    });
    expect(accepted).toBe(true);
    expect(result.current.key).not.toBe(key);
    expect(result.current.inDoubt).toBeNull();
    expect(result.current.state.status).toBe('idle');

    const newKey = result.current.key;
    let pending: Promise<unknown> = Promise.resolve();
    await act(async () => {
      pending = result.current.submit(edited);
      accepted = result.current.reset();
      await pending;
    });
    expect(accepted).toBe(false);
    expect(shop.requests.at(-1)).toMatchObject({ key: newKey, input: edited });
    expect(shop.executions).toBe(2);
  });

  it('warns when the client has no idempotentRetryLink', async () => {
    const { render } = setup({ link: false });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const { result } = render();
      // Without the link nothing reports the attempts: the default limit is shown.
      expect(await submit(result, anOrder)).toMatchObject({
        status: 'succeeded',
        attempt: 1,
        maxAttempts: 8,
      });
      expect(warn).toHaveBeenCalledWith(expect.stringContaining('idempotentRetryLink'));
      expect((await submit(result, edited)).status).toBe('succeeded');
      expect(warn).toHaveBeenCalledOnce();
    } finally {
      warn.mockRestore();
    }
  });

  it('gives no warning with the link in place, and none in a production build', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { result } = setup().render();
    expect((await submit(result, anOrder)).status).toBe('succeeded');
    const failing = setup();
    failing.shop.faults.push(402);
    expect((await submit(failing.render().result, anOrder)).status).toBe('failed');
    expect(warn).not.toHaveBeenCalled();

    vi.stubEnv('NODE_ENV', 'production');
    const noLink = setup({ link: false }).render();
    expect((await submit(noLink.result, anOrder)).status).toBe('succeeded');
    expect(warn).not.toHaveBeenCalled();
  });

  it('a fresh 422 to a re-sent attempt keeps the key (unresolved); checking again replays it and only then fails', async () => {
    const { shop, render } = setup({ maxAttempts: 1 });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { result } = render();
    const key = result.current.key;
    shop.faults.push('drop-request'); // never reached the server
    expect((await submit(result, anOrder)).status).toBe('unknown');

    shop.faults.push(422); // the re-send is the first time the server decides: out of stock, not a replay
    const checked = await submit(result, anOrder);
    expect(checked.status).toBe('unresolved');
    expect(result.current.key).toBe(key);
    expect(result.current.inDoubt).toMatchObject({ payload: anOrder });

    const again = await submit(result, anOrder);
    expect(again).toMatchObject({ status: 'failed', error: { message: 'Out of stock' } });
    expect(result.current.key).not.toBe(key);
    expect(shop.executions).toBe(0);
    warn.mockRestore();
  });

  it('another tab waiting for the outcome: in flight elsewhere (not in doubt), reset refused there', async () => {
    const shop = createFakeShop();
    const releases: Array<() => void> = [];
    const sleep = () => new Promise<void>((resolve) => releases.push(resolve));
    const queryClient = new QueryClient();
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink({ sleep }), shop.terminatingLink()],
    });
    const trpc = createTRPCOptionsProxy<FakeShopRouter>({ client, queryClient });
    const wrapper = ({ children }: { children: ReactNode }) =>
      createElement(QueryClientProvider, { client: queryClient }, children);
    const storage = tabStorage();
    const tab = () =>
      renderHook(
        () =>
          useIdempotentMutation((request) => trpc.checkout.placeOrder.mutationOptions(request), {
            intentId: 'cart',
            storage,
          }),
        { wrapper },
      );
    const paying = tab();
    const other = tab();
    shop.faults.push(503);

    let done: Promise<unknown> = Promise.resolve();
    act(() => {
      done = paying.result.current.submit(anOrder);
    });
    await vi.waitFor(() => expect(releases).toHaveLength(1));
    expect(other.result.current.inFlightElsewhere).toBe(true);
    expect(other.result.current.inDoubt).toBeNull();
    expect(paying.result.current.inFlightElsewhere).toBe(false);
    let refused: boolean | undefined;
    act(() => {
      refused = other.result.current.reset();
    });
    expect(refused).toBe(false);
    expect(other.result.current.key).toBe(paying.result.current.key);

    await act(async () => {
      releases[0]?.();
      await done;
    });
    expect(paying.result.current.state.status).toBe('succeeded');
    expect(other.result.current.inFlightElsewhere).toBe(false);
    expect(other.result.current.inDoubt).toBeNull();
    expect(shop.executions).toBe(1);
  });

  it('a sending tab gone silent (no sign of life for ALIVE_STALE_MS) leaves its attempt in doubt', () => {
    const { render, storage } = setup();
    const now = Date.now();
    const key = crypto.randomUUID();
    storage.setItem(
      'idem:intent:checkout',
      JSON.stringify({ v: 1, key, createdAt: now, sent: { payload: JSON.stringify(anOrder), at: now } }),
    );
    storage.setItem(`idem:alive:checkout:${key}`, String(now));
    const live = render();
    expect(live.result.current).toMatchObject({ inFlightElsewhere: true, inDoubt: null });
    live.unmount();

    storage.setItem(`idem:alive:checkout:${key}`, String(now - ALIVE_STALE_MS - 1));
    const silent = render();
    expect(silent.result.current).toMatchObject({ inFlightElsewhere: false, inDoubt: { payload: anOrder } });
  });

  describe('a record stored by the version that kept the sign of life inside it (a deploy mid-purchase)', () => {
    /** The record as that version stores it while its tab waits: `alive` inside `sent`, refreshed there. */
    const previousFormat = (key: string, sentAt: number, alive?: number) =>
      JSON.stringify({
        v: 1,
        key,
        createdAt: sentAt,
        sent: { payload: JSON.stringify(anOrder), at: sentAt, ...(alive === undefined ? {} : { alive }) },
      });

    it('its payment in flight in a tab of that version shows in flight here, and reset() is refused', () => {
      const { render, storage } = setup();
      const key = crypto.randomUUID();
      storage.setItem('idem:intent:checkout', previousFormat(key, Date.now() - 1_000, Date.now()));
      const { result } = render();
      expect(result.current).toMatchObject({ key, inFlightElsewhere: true, inDoubt: null });
      let refused: boolean | undefined;
      act(() => {
        refused = result.current.reset();
      });
      expect(refused).toBe(false);
      expect(result.current.key).toBe(key);
    });

    it('reloaded into this version, the payment keeps its key: in doubt, and checking replays its outcome', async () => {
      const { shop, render, storage } = setup({ maxAttempts: 1 });
      // The server ran the payment; the page that sent it never got the answer.
      const paying = render();
      const key = paying.result.current.key;
      shop.faults.push('drop-response');
      expect((await submit(paying.result, anOrder)).status).toBe('unknown');
      paying.unmount();
      // What that version left: its record, the sign of life removed as its page went away.
      if (!key) throw new Error('no key');
      const sentAt = Date.now() - 5_000;
      storage.setItem('idem:intent:checkout', previousFormat(key, sentAt));

      const { result } = render();
      expect(result.current).toMatchObject({ key, inFlightElsewhere: false, inDoubt: { payload: anOrder } });
      expect(await submit(result, edited)).toMatchObject({
        status: 'replayed',
        input: anOrder,
        recoveredInDoubt: true,
      });
      expect(shop.requests.map((request) => request.key)).toEqual([key, key]);
      expect(shop.executions).toBe(1);
    });

    it('a sign of life it left stale counts for nothing: in doubt', () => {
      const { render, storage } = setup();
      const key = crypto.randomUUID();
      const sentAt = Date.now() - 60_000;
      storage.setItem('idem:intent:checkout', previousFormat(key, sentAt, sentAt));
      const { result } = render();
      expect(result.current).toMatchObject({ key, inFlightElsewhere: false, inDoubt: { payload: anOrder } });
    });
  });

  it('an intent dated in the future (the clock was turned back) counts as expired: checked, not re-sent', async () => {
    const { shop, render, storage } = setup();
    const now = Date.now();
    storage.setItem(
      'idem:intent:checkout',
      JSON.stringify({
        v: 1,
        key: crypto.randomUUID(),
        createdAt: now + 3_600_000,
        sent: { payload: JSON.stringify(anOrder), at: now },
      }),
    );
    const { result } = render();
    expect(result.current.inDoubt).toMatchObject({ expired: true });
    expect((await submit(result, anOrder)).status).toBe('expired');
    expect(result.current.state).toMatchObject({ status: 'expired', input: anOrder, attempt: 0 });
    expect(shop.requests).toHaveLength(0);
  });

  it('a sent attempt whose stored payload no longer parses is neither re-sent nor replaced: unresolved', async () => {
    const { shop, render, storage } = setup();
    const key = crypto.randomUUID();
    const now = Date.now();
    storage.setItem(
      'idem:intent:checkout',
      JSON.stringify({ v: 1, key, createdAt: now, sent: { payload: '{not json', at: now } }),
    );
    const { result } = render();

    expect((await submit(result, anOrder)).status).toBe('unresolved');
    expect(result.current.state.status).toBe('unresolved');
    expect(shop.requests).toHaveLength(0);
    expect(result.current.key).toBe(key);
  });

  it('renders on the server without a key and without touching storage', () => {
    const shop = createFakeShop();
    const queryClient = new QueryClient();
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink(), shop.terminatingLink()],
    });
    const trpc = createTRPCOptionsProxy<FakeShopRouter>({ client, queryClient });
    const storage: KeyValueStorage = { getItem: vi.fn(), setItem: vi.fn(), removeItem: vi.fn() };
    const requestKeys: string[] = [];
    // biome-ignore lint/correctness/noComponentHookFactories: a one-test component that closes over this test's fixtures; rendered once.
    function Checkout() {
      const { key, state } = useIdempotentMutation(
        (request) => {
          requestKeys.push(request.trpc.context.idempotencyKey);
          return trpc.checkout.placeOrder.mutationOptions(request);
        },
        {
          intentId: 'ssr',
          storage,
        },
      );
      return createElement('p', null, `${state.status}:${key ?? 'no key yet'}`);
    }
    const html = renderToString(
      createElement(QueryClientProvider, { client: queryClient }, createElement(Checkout)),
    );
    expect(html).toContain('idle:no key yet');
    expect(requestKeys).toEqual(['']);
    expect(storage.getItem).not.toHaveBeenCalled();
    expect(storage.setItem).not.toHaveBeenCalled();
    expect(shop.requests).toHaveLength(0);
  });

  it('infers input, output and the app error shape from the tRPC procedure', () => {
    const { render } = setup();
    const { result } = render();
    expectTypeOf(result.current.submit).parameter(0).toEqualTypeOf<OrderInput>();
    expectTypeOf(result.current.state.data).toEqualTypeOf<Order | undefined>();
    expectTypeOf(result.current.state.error?.data?.httpStatus).toEqualTypeOf<number | undefined>();
    expectTypeOf(result.current.inDoubt?.payload).toEqualTypeOf<OrderInput | undefined>();
  });

  it('a 422 to the first send of a key is final: failed, and the key is retired', async () => {
    const { shop, render } = setup();
    const { result } = render();
    const key = result.current.key;
    shop.faults.push(422);
    const outcome = await submit(result, anOrder);
    expect(outcome).toMatchObject({ status: 'failed', error: { message: 'Out of stock' } });
    expect(result.current.key).not.toBe(key);
    expect(result.current.inDoubt).toBeNull();
  });

  it('a re-sent attempt declined for the first time is final: failed (only a 422 leaves it unresolved)', async () => {
    const { shop, render } = setup({ maxAttempts: 1 });
    const { result } = render();
    const key = result.current.key;
    shop.faults.push('drop-request');
    expect((await submit(result, anOrder)).status).toBe('unknown');
    shop.faults.push(402);
    expect(await submit(result, anOrder)).toMatchObject({
      status: 'failed',
      error: { message: 'Card declined' },
    });
    expect(result.current.key).not.toBe(key);
    expect(result.current.inDoubt).toBeNull();
  });

  it('a 422 to a re-sent payload the server holds otherwise: unresolved each time, the transformer hint given once', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { shop, render, storage } = setup({ maxAttempts: 1 });
    const { result } = render();
    const key = result.current.key;
    shop.faults.push('drop-response'); // the server stored anOrder under the key
    expect((await submit(result, anOrder)).status).toBe('unknown');
    // What this tab recorded as sent is not what the server holds (say the links' transformer reshaped it).
    const record = JSON.parse(storage.getItem('idem:intent:checkout') ?? 'null');
    storage.setItem(
      'idem:intent:checkout',
      JSON.stringify({ ...record, sent: { ...record.sent, payload: JSON.stringify(edited) } }),
    );

    expect((await submit(result, edited)).status).toBe('unresolved');
    expect((await submit(result, edited)).status).toBe('unresolved');
    expect(result.current.key).toBe(key);
    const hints = warn.mock.calls.filter(([message]) => String(message).includes('pass it as `transformer`'));
    expect(hints).toEqual([
      [
        'useIdempotentMutation: a re-sent payload got 422. If the tRPC links use a transformer, pass it as `transformer`.',
      ],
    ]);
    expect(warn).toHaveBeenCalledOnce();
  });

  it('gives no transformer hint on an unresolved 422 when the transformer is passed', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { shop, render } = setup({ maxAttempts: 1 });
    const { result } = render({ transformer: superjson });
    shop.faults.push('drop-request');
    expect((await submit(result, anOrder)).status).toBe('unknown');
    shop.faults.push(422);
    expect((await submit(result, anOrder)).status).toBe('unresolved');
    expect(warn).not.toHaveBeenCalled();
  });

  it('"the same payload" is judged by the transformer: under superjson an added undefined property is another request', async () => {
    const { shop, render } = setup({ maxAttempts: 1 });
    const { result } = render({ transformer: superjson });
    shop.faults.push('drop-response');
    expect((await submit(result, anOrder)).status).toBe('unknown');

    const withNote = { ...anOrder, note: undefined } as OrderInput;
    const outcome = await submit(result, withNote);
    expect(outcome).toMatchObject({ status: 'replayed', recoveredInDoubt: true });
    expect(outcome.input).toStrictEqual(anOrder);
  });

  it('rejects a payload with no JSON form before sending anything, keeping the intent as it was', async () => {
    const { shop, render } = setup();
    const { result } = render();
    const key = result.current.key;
    const unsendable = { ...anOrder, total: 10n } as unknown as OrderInput;
    let failure: unknown;
    await act(async () => {
      failure = await result.current.submit(unsendable).catch((error: unknown) => error);
    });
    expect(failure).toBeInstanceOf(TypeError);
    expect(shop.requests).toHaveLength(0);
    expect(result.current).toMatchObject({ key, inDoubt: null, state: { status: 'idle' } });
    // Not stuck: the next submission goes out.
    expect((await submit(result, anOrder)).status).toBe('succeeded');
  });

  it('rejects a payload that would not survive the serializer (a Date stored as JSON, sent by superjson)', async () => {
    const { shop, render } = setup();
    const { result } = render({ transformer: superjson, serializer: jsonSerializer });
    const dated = { ...anOrder, at: new Date(0) } as unknown as OrderInput;
    await expect(act(() => result.current.submit(dated))).rejects.toThrow(/serializer/);
    expect(shop.requests).toHaveLength(0);
  });

  it("the app's callbacks see the intent's key in their request options", async () => {
    const { trpc, wrapper, shop } = setup();
    const storage = tabStorage();
    const keysSeenOnSuccess: string[] = [];
    const requests: IdempotentRequestOptions[] = [];
    const { result } = renderHook(
      () =>
        useIdempotentMutation(
          (request) => {
            requests.push(request);
            return trpc.checkout.placeOrder.mutationOptions({
              ...request,
              onSuccess: () => {
                keysSeenOnSuccess.push(request.trpc.context.idempotencyKey);
              },
            });
          },
          { intentId: 'checkout', storage },
        ),
      { wrapper },
    );
    const key = result.current.key;
    expect(key).not.toBeNull();
    expect(requests.at(-1)?.trpc.context.idempotencyKey).toBe(key);
    expect((await submit(result, anOrder)).status).toBe('succeeded');
    expect(keysSeenOnSuccess).toEqual([key]);
    expect(shop.requests.map((request) => request.key)).toEqual([key]);
  });

  it('fails a submission clearly when mutationOptions gives no mutationFn', async () => {
    const { trpc, wrapper, shop, storage } = setup();
    const { result } = renderHook(
      () =>
        useIdempotentMutation(
          (request) => ({ ...trpc.checkout.placeOrder.mutationOptions(request), mutationFn: undefined }),
          { intentId: 'checkout', storage },
        ),
      { wrapper },
    );
    const outcome = await submit(result, anOrder);
    expect(outcome.error).toMatchObject({
      message: 'useIdempotentMutation: not sent by submit(), or no mutationFn',
    });
    expect(shop.requests).toHaveLength(0);
  });

  it('shows each attempt while it is in flight: the first as sending, a later one as retrying', async () => {
    const shop = createFakeShop();
    const { sleep } = recordingSleep();
    /** Holds each request until the test lets it go on. */
    const held: Array<() => void> = [];
    const holdingLink: TRPCLink<FakeShopRouter> =
      () =>
      ({ next, op }) =>
        observable((observer) => {
          let subscription: { unsubscribe(): void } | undefined;
          held.push(() => {
            subscription = next(op).subscribe(observer);
          });
          return () => subscription?.unsubscribe();
        });
    const queryClient = new QueryClient();
    const client = createTRPCClient<FakeShopRouter>({
      links: [idempotentRetryLink({ sleep, random: () => 1 }), holdingLink, shop.terminatingLink()],
    });
    const trpc = createTRPCOptionsProxy<FakeShopRouter>({ client, queryClient });
    const wrapper = ({ children }: { children: ReactNode }) =>
      createElement(QueryClientProvider, { client: queryClient }, children);
    const storage = tabStorage();
    const { result } = renderHook(
      () =>
        useIdempotentMutation((request) => trpc.checkout.placeOrder.mutationOptions(request), {
          intentId: 'x',
          storage,
        }),
      { wrapper },
    );
    shop.faults.push(503);

    let done: Promise<unknown> = Promise.resolve();
    act(() => {
      done = result.current.submit(anOrder);
    });
    await vi.waitFor(() => expect(held).toHaveLength(1));
    expect(result.current.state).toMatchObject({ status: 'sending', attempt: 1, error: null });
    await act(async () => held[0]?.());
    // The re-render with the link's report comes on React's own schedule: awaited with the held request.
    await vi.waitFor(() => {
      expect(held).toHaveLength(2);
      expect(result.current.state).toMatchObject({
        status: 'retrying',
        attempt: 2,
        error: { data: { httpStatus: 503 } },
      });
    });
    await act(async () => {
      held[1]?.();
      await done;
    });
    expect(result.current.state).toMatchObject({ status: 'succeeded', attempt: 2, error: null });
  });

  it('reset() when another tab already forgot the intent: accepted, a new key', () => {
    const { render, storage } = setup();
    const { result } = render();
    const key = result.current.key;
    storage.removeItem('idem:intent:checkout');
    let accepted: boolean | undefined;
    act(() => {
      accepted = result.current.reset();
    });
    expect(accepted).toBe(true);
    expect(result.current.key).not.toBeNull();
    expect(result.current.key).not.toBe(key);
  });

  it('submit and reset act on the new intent when intentId changes', async () => {
    const { trpc, wrapper, shop } = setup();
    const storage = tabStorage();
    const { result, rerender } = renderHook(
      ({ intentId }) =>
        useIdempotentMutation((request) => trpc.checkout.placeOrder.mutationOptions(request), {
          intentId,
          storage,
        }),
      { wrapper, initialProps: { intentId: 'cart-1' } },
    );
    const first = result.current.key;
    rerender({ intentId: 'cart-2' });
    const second = result.current.key;
    expect(second).not.toBe(first);

    act(() => {
      result.current.reset();
    });
    const renewed = result.current.key;
    expect(renewed).not.toBe(second);
    expect(JSON.parse(storage.getItem('idem:intent:cart-1') ?? 'null')).toMatchObject({ key: first });

    expect((await submit(result, anOrder)).status).toBe('succeeded');
    expect(shop.requests.map((request) => request.key)).toEqual([renewed]);
    expect(JSON.parse(storage.getItem('idem:intent:cart-1') ?? 'null')).toMatchObject({
      key: first,
      sent: null,
    });
  });
});
