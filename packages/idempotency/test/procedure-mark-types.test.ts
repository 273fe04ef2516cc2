/**
 * "Idempotent" is part of a procedure's type, end to end. The type assertions below are checked by
 * `tsc -p tsconfig.json` (`pnpm typecheck`); the test at the bottom is their control: the same file, compiled
 * against a copy of `src/` whose builders do not add the mark, must fail on exactly these assertions.
 */
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { QueryClient } from '@tanstack/react-query';
import { createTRPCClient, type TRPCClientErrorLike } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { createTRPCOptionsProxy } from '@trpc/tanstack-react-query';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import type { IdempotencyStore } from '../src/index.ts';
import { useIdempotentMutation } from '../src/react/index.ts';
import {
  createIdempotency,
  type IdempotentProcedurePath,
  type IsIdempotentProcedureError,
} from '../src/trpc/index.ts';

interface ShopContext {
  headers: Headers;
  principalId: string | null;
}

/**
 * An app's router: idempotent mutations (one per mode, nested or not, with middlewares, a per-procedure error
 * formatter and a router-wide one around them), a plain mutation and a query.
 */
function createShopRouter(store: IdempotencyStore<unknown>) {
  const t = initTRPC.context<ShopContext>().create({
    errorFormatter: ({ shape }) => ({ ...shape, data: { ...shape.data, shop: true as const } }),
  });
  const idempotency = createIdempotency({
    store,
    getScope: (ctx: ShopContext) => ctx.principalId,
    getRequestHeaders: (ctx) => ctx.headers,
  });
  const authed = t.procedure.use(({ ctx, next }) => next({ ctx: { principal: ctx.principalId ?? 'guest' } }));
  return t.router({
    checkout: t.router({
      pay: authed
        .concat(idempotency.external())
        .use(({ next }) => next())
        .input(z.object({ cents: z.number() }))
        .mutation(({ input }) => ({ charged: input.cents })),
      refund: t.procedure
        .concat(idempotency.external())
        .errors(() => undefined)
        .mutation(() => 'refunded' as const),
      subscribe: authed.input(z.object({ email: z.string() })).mutation(() => true),
      status: t.procedure.query(() => 'open' as const),
    }),
    save: t.procedure.concat(idempotency.transactional()).mutation(() => 1),
  });
}
type ShopRouter = ReturnType<typeof createShopRouter>;

/** Hooks over the router, as a page would write them. Typechecked, never rendered. */
export function useShopHooks() {
  const trpc = createTRPCOptionsProxy<ShopRouter>({
    client: createTRPCClient<ShopRouter>({ links: [] }),
    queryClient: new QueryClient(),
  });
  const pay = useIdempotentMutation((request) => trpc.checkout.pay.mutationOptions(request), {
    intentId: 'pay',
  });
  expectTypeOf(pay.submit).parameter(0).toEqualTypeOf<{ cents: number }>();
  expectTypeOf(pay.state.data).toEqualTypeOf<{ charged: number } | undefined>();
  const save = useIdempotentMutation((request) => trpc.save.mutationOptions(request), { intentId: 'save' });
  const refund = useIdempotentMutation((request) => trpc.checkout.refund.mutationOptions(request), {
    intentId: 'refund',
  });
  const subscribe = useIdempotentMutation(
    // @ts-expect-error a plain mutation is not idempotent: the hook refuses it
    (request) => trpc.checkout.subscribe.mutationOptions(request),
    { intentId: 'subscribe' },
  );
  const handWritten = useIdempotentMutation(
    // @ts-expect-error options written by hand (no procedure behind them) are refused too
    () => ({ mutationFn: async (cents: number) => cents }),
    { intentId: 'hand-written' },
  );
  return { pay, save, refund, subscribe, handWritten };
}

describe('the idempotent mark in the router type', () => {
  it('is inferred from the builders: the idempotent mutations, and nothing else', () => {
    expectTypeOf<IdempotentProcedurePath<ShopRouter>>().toEqualTypeOf<
      'checkout.pay' | 'checkout.refund' | 'save'
    >();
    expectTypeOf<IsIdempotentProcedureError<TRPCClientErrorLike<ShopRouter>>>().toEqualTypeOf<false>();
    expect(createShopRouter({} as IdempotencyStore<unknown>)._def.procedures).toHaveProperty('checkout.pay');
  });

  it('control: the same assertions fail to compile once the builders stop adding the mark', async () => {
    const packageDir = path.resolve(import.meta.dirname, '..');
    const scratchRoot = await mkdtemp(path.join(tmpdir(), 'idem-mark-control-'));
    // The package's and the workspace's node_modules, one level apart as in the repository (vitest is the
    // workspace's).
    const scratch = path.join(scratchRoot, 'package');
    try {
      await symlink(
        path.resolve(packageDir, '../../node_modules'),
        path.join(scratchRoot, 'node_modules'),
        'dir',
      );
      await cp(path.join(packageDir, 'src'), path.join(scratch, 'src'), { recursive: true });
      await cp(import.meta.filename, path.join(scratch, 'test', path.basename(import.meta.filename)));
      await symlink(path.join(packageDir, 'node_modules'), path.join(scratch, 'node_modules'), 'dir');
      await writeFile(
        path.join(scratch, 'tsconfig.json'),
        JSON.stringify({ extends: path.join(packageDir, 'tsconfig.json'), include: ['src', 'test'] }),
      );
      const tsc = path.join(packageDir, 'node_modules', 'typescript', 'bin', 'tsc');
      const compile = () =>
        promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.json', '--noEmit'], {
          cwd: scratch,
        }).then(
          () => '',
          (error: { stdout?: string }) => error.stdout ?? String(error),
        );

      // Protected: the copy as it is compiles cleanly.
      expect(await compile()).toBe('');

      // Control: `registered()` hands the builder back unmarked.
      const middleware = path.join(scratch, 'src', 'trpc', 'middleware.ts');
      const source = await readFile(middleware, 'utf8');
      const unmarked = source.replace(
        'return procedure as unknown as MarkedIdempotent<TProcedure>;',
        'return procedure as never;',
      );
      expect(unmarked).not.toBe(source);
      await writeFile(middleware, unmarked.replace('): MarkedIdempotent<TProcedure> {', '): TProcedure {'));
      const errors = await compile();
      // Unmarked, the three idempotent procedures are refused by the hook and the router has no idempotent path.
      const refusals = errors.match(/Property 'notAnIdempotentProcedure' is missing/g) ?? [];
      expect(refusals).toHaveLength(3);
      expect(errors).toContain('Expected: literal string: checkout.pay, Actual: never');
    } finally {
      await rm(scratchRoot, { recursive: true, force: true });
    }
  }, 60_000);
});
