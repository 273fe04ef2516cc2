/**
 * The retry link's DEFAULT schedule against a server restart: a real HTTP server on a local port (the fake shop
 * behind node:http) is closed, so connections are refused and fetch fails as it does in a browser during a
 * rolling restart, and listens again on the same port once the outage is over.
 *
 * Only the link's waits are virtual: its `sleep` advances a clock and reopens the server when that clock reaches
 * the end of the outage. The requests are real; no assertion depends on how long anything takes on this machine.
 * `random` is injected (the jitter's draw), everything else is the link's default.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { createTRPCClient, httpLink } from '@trpc/client';
import superjson from 'superjson';
import { afterEach, describe, expect, it } from 'vitest';
import {
  idempotencyHeaders,
  idempotentRetryLink,
  isIdempotencyOutcomeUnknown,
  type RetryLinkEvent,
} from '../src/client/index.ts';
import { anOrder, createFakeShop, type FakeShopRouter } from './client-fake-shop.ts';

/**
 * A port below the kernel's ephemeral range, where no outgoing connection takes it while the server is closed
 * and a connection to it can never meet itself (a TCP self-connect to a closed ephemeral port). Without a
 * readable range (not Linux): any free port.
 */
function portsToTry(): number[] {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (low !== undefined && low > 11_000) {
      return Array.from({ length: 20 }, () => 10_000 + Math.floor(Math.random() * (low - 10_000)));
    }
  } catch {}
  return [0];
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => (server.listening ? close(server) : undefined)));
});

/** The fake shop on a real port, and a client with the default link whose waits run on a virtual clock. */
async function restartingShop(random: () => number) {
  const shop = createFakeShop();
  const server = createServer(getRequestListener((request) => shop.fetch(request)));
  servers.push(server);
  let port = 0;
  for (const candidate of portsToTry()) {
    try {
      await listen(server, candidate);
      port = (server.address() as AddressInfo).port;
      break;
    } catch {}
  }
  if (port === 0) throw new Error('no free port to listen on');

  let clock = 0;
  let upAt = 0;
  const delays: number[] = [];
  const sleep = async (ms: number) => {
    delays.push(ms);
    clock += ms;
    if (!server.listening && clock >= upAt) await listen(server, port);
  };
  const client = createTRPCClient<FakeShopRouter>({
    links: [
      idempotentRetryLink<FakeShopRouter>({ sleep, random }),
      httpLink({
        url: `http://127.0.0.1:${port}/api/trpc`,
        transformer: superjson,
        headers: ({ op }) => idempotencyHeaders(op),
      }),
    ],
  });
  const events: Array<RetryLinkEvent & { at: number }> = [];
  const context = () => ({
    idempotencyKey: randomUUID(),
    idempotencyObserver: (event: RetryLinkEvent) => events.push({ ...event, at: clock }),
  });
  return {
    shop,
    client,
    delays,
    events,
    context,
    /** Closes the server now (open connections too); it listens again `outageMs` later on the virtual clock. */
    restart: async (outageMs: number) => {
      upAt = clock + outageMs;
      await close(server);
    },
  };
}

describe('idempotentRetryLink defaults × a restarting server', () => {
  // Each wait is at least half its ceiling, so whatever the draws the waits add up to 11.25 s at the least:
  // `random() = 0` is the unluckiest case.
  it.each([0, 0.5, 1])(
    'rides out a 10 s outage whatever the jitter draws (random() = %s): re-sent with its key, run once',
    async (draw) => {
      const { shop, client, events, context, restart } = await restartingShop(() => draw);
      // A first order over a kept-alive connection, then the restart: the open connection is cut too.
      await client.checkout.placeOrder.mutate(anOrder, { context: context() });
      events.length = 0;
      await restart(10_000);

      const call = context();
      const order = await client.checkout.placeOrder.mutate(anOrder, { context: call });

      expect(order).toMatchObject({ id: 2 });
      expect(shop.executions).toBe(2);
      const retries = events.filter((event) => event.type === 'retrying');
      expect(retries.length).toBeGreaterThan(0);
      expect(new Set(retries.map((event) => event.reason))).toEqual(new Set(['network']));
      // The attempt that got through was sent after the outage, with the key of the first.
      const last = events.findLast((event) => event.type === 'attempt');
      expect(last?.at).toBeGreaterThanOrEqual(10_000);
      expect(shop.requests.at(-1)?.key).toBe(call.idempotencyKey);
      expect(shop.requests).toHaveLength(2);
    },
  );

  // A restart of a few seconds takes a few of the attempts, not the whole budget.
  it('a rolling restart of 5 s, median draw: ridden out by the fifth attempt', async () => {
    const { shop, client, delays, events, context, restart } = await restartingShop(() => 0.5);
    await restart(5_000);

    await expect(client.checkout.placeOrder.mutate(anOrder, { context: context() })).resolves.toMatchObject({
      id: 1,
    });

    expect(shop.requests).toHaveLength(1);
    // 375 + 750 + 1500 + 3000 ms: the fifth attempt is the first one after the restart.
    expect(delays).toEqual([375, 750, 1500, 3000]);
    expect(events.at(-1)).toMatchObject({ type: 'response', ok: true, replayed: false });
  });

  // The budget: 8 attempts, and 7 waits that add up to 11.25 s with the lowest draw and 22.5 s with the highest.
  it.each([
    [0, 11_250],
    [1, 22_500],
  ])(
    'a server that does not come back: 8 attempts (random() = %s: %s ms of waits), then outcome unknown',
    async (draw, total) => {
      const { shop, client, delays, events, context, restart } = await restartingShop(() => draw);
      await restart(Number.POSITIVE_INFINITY);

      const call = context();
      const error = await client.checkout.placeOrder
        .mutate(anOrder, { context: call })
        .catch((caught: unknown) => caught);

      // Not a bare "fetch failed": the outcome is unknown, and the error says what to do and with which key.
      expect(isIdempotencyOutcomeUnknown(error)).toBe(true);
      expect(error).toMatchObject({
        name: 'TRPCClientError',
        message: expect.stringMatching(
          /^Outcome unknown: checkout\.placeOrder got no answer in 8 attempts \(last: fetch failed\)\. Retry with the same idempotency key/,
        ),
        cause: { key: call.idempotencyKey, attempts: 8, reason: 'network' },
      });
      expect(events.filter((event) => event.type === 'attempt')).toHaveLength(8);
      expect(delays).toHaveLength(7);
      expect(delays.reduce((sum, ms) => sum + ms, 0)).toBe(total);
      expect(shop.requests).toHaveLength(0);
    },
  );
});
