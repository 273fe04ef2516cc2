/**
 * The bench procedures called in this process through tRPC's `createCaller` (no HTTP), for the in-process
 * profiles: `unprotected` runs THE handler (effect.ts) in a transaction of its own, `protected` runs the handler's
 * insert in the transaction the idempotency middleware opens for it.
 */
import type { Database } from '@idem/db';
import type { PrismaTransactionLike } from '@idem/idempotency/prisma';
import { type CreateIdempotencyConfig, createIdempotency } from '@idem/idempotency/trpc';
import { initTRPC } from '@trpc/server';
import { z } from 'zod';
import { insertEffect, runEffect } from '../peers/effect.ts';

/** A request's context: only its headers, which carry its Idempotency-Key. */
export interface BenchContext {
  headers: Headers;
}

/** The middleware's configuration, but where the headers are: always the context's (`withKey`). */
export type BenchIdempotency = Omit<
  CreateIdempotencyConfig<BenchContext, PrismaTransactionLike<Database>>,
  'getRequestHeaders'
>;

/** The procedures on `db`, `protected` behind a middleware configured by `idempotency`. */
export function benchCaller(db: Database, idempotency: BenchIdempotency) {
  const t = initTRPC.context<BenchContext>().create();
  const middleware = createIdempotency<BenchContext, PrismaTransactionLike<Database>>({
    ...idempotency,
    getRequestHeaders: (ctx) => ctx.headers,
  });
  const input = z.object({ n: z.number().int() });
  return t.router({
    unprotected: t.procedure.input(input).mutation(({ input }) => runEffect(db, input.n)),
    protected: t.procedure
      .concat(middleware.transactional())
      .input(input)
      .mutation(({ ctx, input }) => insertEffect(ctx.idempotency.tx, input.n)),
  }).createCaller;
}

/** The context of a request that sends `key` as its Idempotency-Key. */
export function withKey(key: string): BenchContext {
  return { headers: new Headers({ 'idempotency-key': key }) };
}
