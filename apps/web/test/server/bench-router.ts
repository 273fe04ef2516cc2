/**
 * Benchmark-only procedures (`pnpm bench`, apps/bench/src/run.ts), mounted only by the test build of the router
 * the benchmark starts, never by the app's own `appRouter`.
 * Both run the SAME handler body in ONE interactive transaction: the only difference is the middleware.
 * The table `bench_effects` is created by the bench harness with raw SQL, not by a migration.
 * `noop` is the request path alone: the same principal (resolved from the bearer token, one query, as on every
 * route), input and transformer, and no database work of its own — the floor under any answer the app's route
 * gives, a replay included.
 * `placeOrderUnprotected` is the checkout's own service (`checkout.placeOrder` without the idempotency layer, a
 * fresh order id per call): the realistic path's baseline.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { env } from '~/env';
import { placeOrderInput } from '~/lib/schemas';
import type { AppIdempotency } from '~/server/idempotency';
import { enqueueFulfilmentIn } from '~/server/jobs';
import { placeOrder } from '~/server/services/place-order';
import { createTRPCRouter, principalProcedure } from '~/server/trpc';

const benchInput = z.object({ n: z.number().int() });

interface SqlRunner {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
}

/** The effect: one row. `id` as a number (a bigserial far below 2^53 here) so both procedures return plain JSON. */
async function insertEffect(tx: SqlRunner, n: number): Promise<{ id: number; at: Date }> {
  const rows = await tx.$queryRawUnsafe<Array<{ id: bigint | number; at: Date }>>(
    'insert into bench_effects (n) values ($1) returning id, at',
    n,
  );
  const row = rows[0];
  if (!row) throw new Error('bench_effects: insert returned no row');
  return { id: Number(row.id), at: row.at };
}

export function createBenchRouter(idempotency: AppIdempotency) {
  return createTRPCRouter({
    unprotected: principalProcedure
      .input(benchInput)
      .mutation(({ ctx, input }) => ctx.db.$transaction((tx) => insertEffect(tx, input.n))),
    protected: principalProcedure
      .concat(idempotency.transactional())
      .input(benchInput)
      .mutation(({ ctx, input }) => insertEffect(ctx.idempotency.tx, input.n)),
    noop: principalProcedure.input(benchInput).mutation(({ input }) => ({ n: input.n })),
    placeOrderUnprotected: principalProcedure.input(placeOrderInput).mutation(({ ctx, input }) =>
      placeOrder(
        {
          db: ctx.db,
          provider: ctx.provider,
          newOrderLimit: env.newOrderLimit,
          enqueueFulfilment: enqueueFulfilmentIn,
        },
        { principalId: ctx.principal.id, orderId: randomUUID(), clientRef: null, input },
      ),
    ),
  });
}
