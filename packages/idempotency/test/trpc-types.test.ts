/**
 * Type tests (checked by `tsc -p tsconfig.json`, which includes test/), plus a runtime check that the concat'ed
 * procedures see the same context the types promise.
 */
import type { Database } from '@idem/db';
import { initTRPC, TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../src/prisma/index.ts';
import {
  createIdempotency,
  type IdempotentProcedureContext,
  type TransactionalProcedureContext,
} from '../src/trpc/index.ts';
import { connectWithOwnTable } from './support/db.ts';
import { createTestTRPC, freshIdentity, requestContext } from './support/trpc.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

describe('ctx.idempotency types', () => {
  it('transactional: key, scope and the transaction; external: no transaction; outer context kept', async () => {
    const { t, idempotency } = createTestTRPC(db);
    // An app's authed procedure: narrows principalId to string and adds a field.
    const authed = t.procedure.use(({ ctx, next }) => {
      if (!ctx.principalId) throw new TRPCError({ code: 'UNAUTHORIZED' });
      return next({ ctx: { principalId: ctx.principalId, role: 'customer' as const } });
    });
    const seen: Array<{
      procedure: string;
      principalId: string;
      role: string;
      hasTx: boolean;
      key: string;
      scope: string;
    }> = [];

    const router = t.router({
      transactional: authed
        .concat(idempotency.transactional())
        .input(z.object({ n: z.number() }))
        .mutation(async ({ ctx, input }) => {
          expectTypeOf(ctx.idempotency.key).toEqualTypeOf<string>();
          expectTypeOf(ctx.idempotency.scope).toEqualTypeOf<string>();
          expectTypeOf(ctx.idempotency.tx).toEqualTypeOf<PrismaTransactionLike<Database>>();
          expectTypeOf(ctx.idempotency).toExtend<
            TransactionalProcedureContext<PrismaTransactionLike<Database>>
          >();
          // The outer context survives the concat, including what an earlier middleware narrowed or added.
          expectTypeOf(ctx.principalId).toEqualTypeOf<string>();
          expectTypeOf(ctx.role).toEqualTypeOf<'customer'>();
          expectTypeOf(ctx.headers).toEqualTypeOf<Headers>();
          expectTypeOf(ctx.resHeaders).toEqualTypeOf<Headers>();
          expectTypeOf(input).toEqualTypeOf<{ n: number }>();
          const rows = await ctx.idempotency.tx.$queryRawUnsafe<Array<{ one: number }>>('select 1 as one');
          seen.push({
            procedure: 'transactional',
            principalId: ctx.principalId,
            role: ctx.role,
            hasTx: 'tx' in ctx.idempotency,
            key: ctx.idempotency.key,
            scope: ctx.idempotency.scope,
          });
          return { n: input.n, one: rows[0]?.one };
        }),
      external: authed
        .concat(idempotency.external())
        .input(z.object({ n: z.number() }))
        .mutation(({ ctx, input }) => {
          expectTypeOf(ctx.idempotency.key).toEqualTypeOf<string>();
          expectTypeOf(ctx.idempotency).toEqualTypeOf<IdempotentProcedureContext>();
          expectTypeOf(ctx.idempotency).not.toHaveProperty('tx');
          expectTypeOf(ctx.principalId).toEqualTypeOf<string>();
          expectTypeOf(ctx.role).toEqualTypeOf<'customer'>();
          seen.push({
            procedure: 'external',
            principalId: ctx.principalId,
            role: ctx.role,
            hasTx: 'tx' in ctx.idempotency,
            key: ctx.idempotency.key,
            scope: ctx.idempotency.scope,
          });
          return input.n;
        }),
      // Without an outer middleware, the root context's own (wider) types are kept.
      plain: t.procedure.concat(idempotency.external()).mutation(({ ctx }) => {
        expectTypeOf(ctx.principalId).toEqualTypeOf<string | null>();
        expectTypeOf(ctx.idempotency.scope).toEqualTypeOf<string>();
        return ctx.idempotency.scope;
      }),
    });

    const caller = t.createCallerFactory(router);
    const { principal, key } = freshIdentity();
    const transactional = await caller(requestContext(key, principal)).transactional({ n: 1 });
    expectTypeOf(transactional).toEqualTypeOf<{ n: number; one: number | undefined }>();
    expect(transactional).toEqual({ n: 1, one: 1 });
    expect(await caller(requestContext(key, principal)).external({ n: 2 })).toBe(2);
    expect(await caller(requestContext(key, principal)).plain()).toBe(principal);

    expect(seen).toEqual([
      {
        procedure: 'transactional',
        principalId: principal,
        role: 'customer',
        hasTx: true,
        key,
        scope: principal,
      },
      {
        procedure: 'external',
        principalId: principal,
        role: 'customer',
        hasTx: false,
        key,
        scope: principal,
      },
    ]);
  });
});

describe('createIdempotency without explicit generics', () => {
  it('infers the context from the annotated getter and the transaction type from the store', () => {
    type AppContext = { principal: string; headers: Headers };
    const idempotency = createIdempotency({
      store: createPrismaIdempotencyStore(db),
      getScope: (ctx: AppContext) => ctx.principal,
      getRequestHeaders: (ctx) => ctx.headers,
    });
    const t = initTRPC.context<AppContext>().create();
    const procedure = t.procedure.concat(idempotency.transactional()).mutation(({ ctx }) => {
      expectTypeOf(ctx.idempotency.tx).toEqualTypeOf<PrismaTransactionLike<Database>>();
      expectTypeOf(ctx.principal).toEqualTypeOf<string>();
      return ctx.idempotency.keyed;
    });
    expect(procedure._def.type).toBe('mutation');
  });
});
