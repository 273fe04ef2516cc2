/**
 * The two things the tRPC adapter (src/trpc/middleware.ts) relies on that tRPC v11 does not make public, pinned
 * here so that a tRPC release that changes either fails this file by name instead of breaking replays or the
 * streamed-response refusal at run time:
 * 1. a resolved procedure keeps its middleware chain, by identity, in `_def.middlewares`, and `responseMeta`
 *    receives those procedure objects in `info.calls` (how `streamedResponseMeta` recognises an idempotent
 *    procedure before anything runs: nothing public says which middlewares a procedure has);
 * 2. a middleware result is `{ marker: 'middlewareMarker', ok, data | error }`, and a middleware may return one
 *    it built itself (how a replay answers without calling `next()`: tRPC has no public constructor for it).
 * Only tRPC's public entry points are used to observe them.
 */
import { initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { describe, expect, it } from 'vitest';

const t = initTRPC.create();

describe('tRPC internals the adapter relies on', () => {
  it("a procedure's _def.middlewares holds the middleware passed to .use(), also through .concat()", () => {
    const own = t.middleware(({ next }) => next());
    const plugged = t.procedure.use(own);
    const procedure = t.procedure.concat(plugged).mutation(() => 'done');
    const chain = (procedure as unknown as { _def: { middlewares: unknown } })._def.middlewares;
    expect(Array.isArray(chain)).toBe(true);
    const registered = (plugged as unknown as { _def: { middlewares: readonly object[] } })._def.middlewares;
    expect(registered.length).toBeGreaterThan(0);
    for (const middleware of registered) expect(chain).toContain(middleware);
  });

  it("responseMeta's info.calls carry those procedure objects", async () => {
    const procedure = t.procedure.mutation(() => 'done');
    const router = t.router({ act: procedure });
    const seen: unknown[] = [];
    await fetchRequestHandler({
      endpoint: '/trpc',
      req: new Request('http://localhost/trpc/act', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      }),
      router,
      createContext: () => ({}),
      responseMeta: ({ info }) => {
        seen.push(...(info?.calls.map((call) => call.procedure) ?? []));
        return {};
      },
    });
    expect(seen).toEqual([procedure]);
  });

  it("tRPC's own next() result has the shape a replay builds", async () => {
    let observed: unknown;
    const spy = t.middleware(async ({ next }) => {
      const result = await next();
      observed = result;
      return result;
    });
    const caller = t.createCallerFactory(
      t.router({
        ok: t.procedure.use(spy).mutation(() => 42),
        fails: t.procedure.use(spy).mutation(() => {
          throw new TRPCError({ code: 'CONFLICT', message: 'no' });
        }),
      }),
    )({});
    await caller.ok();
    expect(observed).toMatchObject({ marker: 'middlewareMarker', ok: true, data: 42 });
    await expect(caller.fails()).rejects.toThrow('no');
    expect(observed).toMatchObject({ marker: 'middlewareMarker', ok: false });
    expect((observed as { error: unknown }).error).toBeInstanceOf(TRPCError);
  });

  it('a middleware may answer with a result it built, without calling next()', async () => {
    let resolverRuns = 0;
    const replaying = (result: object) => t.middleware(async () => result as never);
    const stored = new TRPCError({ code: 'UNPROCESSABLE_CONTENT', message: 'stored error' });
    const caller = t.createCallerFactory(
      t.router({
        replayed: t.procedure
          .use(replaying({ ok: true, data: { id: 7 }, marker: 'middlewareMarker' }))
          .mutation(() => {
            resolverRuns += 1;
            return { id: 0 };
          }),
        replayedError: t.procedure
          .use(replaying({ ok: false, error: stored, marker: 'middlewareMarker' }))
          .mutation(() => {
            resolverRuns += 1;
            return { id: 0 };
          }),
      }),
    )({});
    expect(await caller.replayed()).toEqual({ id: 7 });
    await expect(caller.replayedError()).rejects.toBe(stored);
    expect(resolverRuns).toBe(0);
  });
});
