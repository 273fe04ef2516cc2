/**
 * The README's adapter recipes, over real HTTP: `idempotencyHttpContext` builds the context on tRPC's
 * standalone (Node) adapter and on its fetch adapter, and `idempotency.responseMeta` puts the middleware's
 * response headers on the response. The control is the standalone server without `responseMeta`: the replay
 * comes back without `Idempotent-Replayed`, silently.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Database } from '@idem/db';
import { initTRPC } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { createIdempotency, type IdempotencyHttpContext, idempotencyHttpContext } from '../src/trpc/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';

type Context = IdempotencyHttpContext & { principal: string };

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

function setup() {
  const t = initTRPC.context<Context>().create({ transformer: superjson, isDev: false });
  // No explicit generics: the context from the getter's annotation, the transaction type from the store.
  const idempotency = createIdempotency({
    store: createPrismaIdempotencyStore(db),
    transformer: superjson,
    getScope: (ctx: Context) => ctx.principal,
    getRequestHeaders: (ctx) => ctx.headers,
    getResponseHeaders: (ctx) => ctx.resHeaders,
    isBatched: (ctx) => ctx.isBatch,
    isStreamed: (ctx) => ctx.isStreamed,
  });
  let executions = 0;
  const router = t.router({
    note: t.procedure
      .concat(idempotency.external())
      .input(z.object({ text: z.string() }))
      .mutation(({ ctx, input }) => {
        executions += 1;
        // An app header on the same response: the recipe must leave it alone.
        ctx.resHeaders.append('set-cookie', `seen=${executions}`);
        return { text: input.text, run: executions };
      }),
  });
  return { router, idempotency, executions: () => executions };
}

/** The same keyed request twice over HTTP: both responses. */
async function sendTwice(url: string, principal: string) {
  const key = randomUUID();
  const send = () =>
    fetch(`${url}/note`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-principal': principal },
      body: JSON.stringify({ json: { text: 'hello' } }),
    });
  const first = await send();
  const second = await send();
  return { first, second, bodies: [await first.text(), await second.text()] };
}

async function withStandaloneServer<T>(
  withResponseMeta: boolean,
  body: (url: string, executions: () => number) => Promise<T>,
): Promise<T> {
  const { router, idempotency, executions } = setup();
  const server = createHTTPServer({
    router,
    createContext: (opts) => ({
      ...idempotencyHttpContext(opts),
      principal: String(opts.req.headers['x-principal']),
    }),
    ...(withResponseMeta ? { responseMeta: idempotency.responseMeta } : {}),
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await body(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, executions);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

describe('tRPC adapters with idempotencyHttpContext', () => {
  it('control: standalone without responseMeta replays, but the replay does not say so', async () => {
    await withStandaloneServer(false, async (url, executions) => {
      const { second, bodies } = await sendTwice(url, uniqueScope());
      expect(executions()).toBe(1);
      expect(bodies[1]).toBe(bodies[0]);
      expect(second.headers.get('idempotent-replayed')).toBeNull();
    });
  });

  it('standalone with idempotency.responseMeta: the replay carries Idempotent-Replayed: true', async () => {
    await withStandaloneServer(true, async (url, executions) => {
      const { first, second, bodies } = await sendTwice(url, uniqueScope());
      expect(executions()).toBe(1);
      expect(bodies[1]).toBe(bodies[0]);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(second.headers.get('idempotent-replayed')).toBe('true');
    });
  });

  it('fetch adapter with the same recipe: the header once, and the app’s cookie kept', async () => {
    const { router, idempotency, executions } = setup();
    const principal = uniqueScope();
    const key = randomUUID();
    const send = () =>
      fetchRequestHandler({
        endpoint: '/trpc',
        router,
        req: new Request('http://local/trpc/note', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ json: { text: 'hello' } }),
        }),
        createContext: (opts) => ({ ...idempotencyHttpContext(opts), principal }),
        responseMeta: idempotency.responseMeta,
      });
    const first = await send();
    const second = await send();
    expect(executions()).toBe(1);
    expect(await second.text()).toBe(await first.text());
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(first.headers.get('set-cookie')).toBe('seen=1');
  });
});

describe('the transformer default: the identity, as tRPC without one', () => {
  /** Two sends of one keyed request through the fetch adapter: the router's and the instance's transformer. */
  async function twoSends(
    routerTransformer: { transformer?: typeof superjson },
    transformer: { transformer?: typeof superjson },
  ) {
    const t = initTRPC.context<Context>().create({ isDev: false, ...routerTransformer });
    const idempotency = createIdempotency({
      store: createPrismaIdempotencyStore(db),
      ...transformer,
      getScope: (ctx: Context) => ctx.principal,
      getRequestHeaders: (ctx) => ctx.headers,
      getResponseHeaders: (ctx) => ctx.resHeaders,
    });
    const router = t.router({
      note: t.procedure
        .concat(idempotency.external())
        .input(z.object({ text: z.string() }))
        .mutation(({ input }) => ({ text: input.text, at: new Date(Date.UTC(2026, 0, 1)) })),
    });
    const principal = uniqueScope();
    const key = randomUUID();
    const send = () =>
      fetchRequestHandler({
        endpoint: '/trpc',
        router,
        req: new Request('http://local/trpc/note', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify(
            routerTransformer.transformer ? { json: { text: 'hello' } } : { text: 'hello' },
          ),
        }),
        createContext: (opts) => ({ ...idempotencyHttpContext(opts), principal }),
        responseMeta: idempotency.responseMeta,
      });
    const first = await send();
    const second = await send();
    return {
      first: await first.text(),
      second: await second.text(),
      replayed: second.headers.get('idempotent-replayed'),
    };
  }

  it('control: left out while the router has superjson, the replay is another body (the Date lost)', async () => {
    const { first, second, replayed } = await twoSends({ transformer: superjson }, {});
    expect(replayed).toBe('true');
    expect(second).not.toBe(first);
  });

  it('no transformer on either side (the identity default): the replay is byte-identical', async () => {
    const { first, second, replayed } = await twoSends({}, {});
    expect(replayed).toBe('true');
    expect(second).toBe(first);
    expect(JSON.parse(first)).toEqual({
      result: { data: { text: 'hello', at: '2026-01-01T00:00:00.000Z' } },
    });
  });
});
