/**
 * (b) Idem, outside Next: `@idem/idempotency/trpc` `transactional()` on a tRPC standalone server, with the Prisma
 * store. `bench.protected` and `bench.unprotected` run the same handler; the only difference is the middleware
 * (the claim, the handler's insert and the stored result commit in ONE transaction). `bench.noop` runs no handler:
 * the floor of any answer on this server; `bench.oneMoreStatement` runs it with one more statement (`select 1`);
 * `bench.protectedWithoutSql` runs it behind the same middleware over a store that writes nothing
 * (store-without-sql.ts): the library's JavaScript alone. No transformer on this router, so the idempotency layer
 * gets the identity transformer (its replay is then byte-identical JSON).
 */
import type { Database } from '@idem/db';
import { createReplayCache, type IdempotencyOptions, type IdempotencyStore } from '@idem/idempotency';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '@idem/idempotency/prisma';
import { createIdempotency } from '@idem/idempotency/trpc';
import { initTRPC } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { z } from 'zod';
import { insertEffect, runEffect, runEffectAndOneStatement } from '../effect.ts';
import { storeWithoutSql } from './store-without-sql.ts';
import type { StartServer } from './types.ts';

interface BenchContext {
  /** The principal the keys belong to; this bench has one caller. */
  scope: string;
  headers: Headers;
  /** Filled by the middleware (Idempotent-Replayed, Retry-After), sent by `responseMeta`. */
  resHeaders: Headers;
  isBatch: boolean;
}

const identityTransformer = {
  serialize: (value: unknown) => value,
  deserialize: (value: unknown) => value,
};

const benchInput = z.object({ n: z.number().int() });

function toHeaders(raw: NodeJS.Dict<string | string[]>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (typeof value === 'string') headers.set(name, value);
    else if (Array.isArray(value)) for (const item of value) headers.append(name, item);
  }
  return headers;
}

function createBenchRouter(db: Database, fastPath: object) {
  const t = initTRPC.context<BenchContext>().create();
  const layer = (
    defaults: IdempotencyOptions,
    store: IdempotencyStore<PrismaTransactionLike<Database>> = createPrismaIdempotencyStore(db, { fastPath }),
  ) =>
    createIdempotency<BenchContext, PrismaTransactionLike<Database>>({
      store,
      transformer: identityTransformer,
      getScope: (ctx) => ctx.scope,
      getRequestHeaders: (ctx) => ctx.headers,
      getResponseHeaders: (ctx) => ctx.resHeaders,
      isBatched: (ctx) => ctx.isBatch,
      defaults,
    });
  const idempotency = layer({});
  // The opt-in replay cache: the same layer, duplicates of completed keys answered from memory, from the first
  // duplicate on (the response this process committed is remembered).
  const withReplayCache = layer({
    replayCache: createReplayCache({ maxEntries: 100_000, rememberCommitted: true }),
  });
  // An experiment: the same middleware over a store that writes nothing (it protects nothing).
  const withoutSql = layer({}, storeWithoutSql(db));
  return t.router({
    bench: t.router({
      unprotected: t.procedure.input(benchInput).mutation(({ input }) => runEffect(db, input.n)),
      // The same input parsed and answered with no database work: the floor of any answer on this server.
      noop: t.procedure.input(benchInput).mutation(({ input }) => ({ n: input.n })),
      // The same handler and one more round trip in its transaction (`select 1`): the price of a round trip.
      oneMoreStatement: t.procedure
        .input(benchInput)
        .mutation(({ input }) => runEffectAndOneStatement(db, input.n)),
      protected: t.procedure
        .concat(idempotency.transactional())
        .input(benchInput)
        .mutation(({ ctx, input }) => insertEffect(ctx.idempotency.tx, input.n)),
      protectedWithoutSql: t.procedure
        .concat(withoutSql.transactional())
        .input(benchInput)
        .mutation(({ ctx, input }) => insertEffect(ctx.idempotency.tx, input.n)),
      protectedReplayCache: t.procedure
        .concat(withReplayCache.transactional())
        .input(benchInput)
        .mutation(({ ctx, input }) => insertEffect(ctx.idempotency.tx, input.n)),
    }),
  });
}

export const startIdem: StartServer = async ({ db, dbAdapter }) => {
  const server = createHTTPServer({
    router: createBenchRouter(db, dbAdapter),
    createContext: ({ req, info }): BenchContext => ({
      scope: 'bench',
      headers: toHeaders(req.headers),
      resHeaders: new Headers(),
      isBatch: info.isBatchCall && info.calls.length > 1,
    }),
    responseMeta: ({ ctx }) => (ctx ? { headers: ctx.resHeaders } : {}),
  });
  return { server, close: async () => {} };
};
