/**
 * Connection cuts at the worst moments, through a wire-protocol-aware TCP proxy (./tcp-proxy.ts) that sits
 * between the app's Prisma client and a scratch database of this file's own:
 *
 * - transactional mode, cut right AFTER the server's COMMIT reply (committed, the client never hears) and right
 *   BEFORE the COMMIT reaches the server (rolled back);
 * - external mode, the completion UPDATE's connection cut after the server applied it / before it reached it.
 *
 * The client retries with the same key. Every protected case has a control twin without the protection (no
 * idempotency layer, a naive "record the key first" dedupe, or a naive "release the key on any error" policy)
 * where the duplicate or the lost write shows up.
 */
import { randomUUID } from 'node:crypto';
import { createPrismaClient, type Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import {
  type Attempt,
  callWithRetries,
  createScratchDatabase,
  createTestTRPC,
  requestContext,
  type TestContext,
} from './support.ts';
import { PgCutProxy } from './tcp-proxy.ts';

let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
let proxy: PgCutProxy;
/** The app's client: through the proxy. */
let app: Database;
/** The test's own eyes (and the "outside service"): straight to the server, never cut. */
let direct: Database;

const COMMIT = /^\s*commit\b/i;
const COMPLETE = /set state = 'completed'/i;
const figures: string[] = [];

beforeAll(async () => {
  scratch = await createScratchDatabase(inject('postgresAdminUrl'), 'idem_fault_net');
  direct = createPrismaClient({ connectionString: scratch.url, max: 2 });
  await direct.$executeRawUnsafe(
    `create table fault_effects (id bigserial primary key, scope text not null, key text not null,
       execution uuid not null)`,
  );
  await direct.$executeRawUnsafe(
    'create table fault_naive_keys (scope text not null, key text not null, primary key (scope, key))',
  );
  const target = new URL(scratch.url);
  proxy = await PgCutProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
  app = createPrismaClient({ connectionString: proxy.urlFor(scratch.url), max: 4 });
});

afterAll(async () => {
  for (const line of figures) console.log(line);
  await app?.$disconnect();
  await direct?.$disconnect();
  await proxy?.close();
  await scratch?.drop();
});

const input = { amount: 4200 };
const inputSchema = z.object({ amount: z.number().int().positive() });
type Result = { execution: string };

async function effectsOf(scope: string) {
  return direct.$queryRawUnsafe<Array<{ key: string; execution: string }>>(
    'select key, execution::text as execution from fault_effects where scope = $1 order by id',
    scope,
  );
}

/** The key's lease ends, as the database's clock passing `locked_until` would (its owner is gone). */
async function leaseEnds(scope: string) {
  const ended = await direct.$executeRawUnsafe(
    "update idempotency_keys set locked_until = now() - interval '1 second' where scope = $1 and state = 'processing'",
    scope,
  );
  expect(ended).toBe(1);
}

async function keyState(scope: string) {
  const rows = await direct.$queryRawUnsafe<Array<{ state: string; lease_live: boolean }>>(
    'select state, coalesce(locked_until > now(), false) as lease_live from idempotency_keys where scope = $1',
    scope,
  );
  return rows[0] ?? null;
}

/** Sends one logical request (one key) with bounded retries, through a tRPC caller. */
async function send(call: (ctx: TestContext) => Promise<Result>, scope: string, key: string) {
  return callWithRetries(call, () => requestContext(key, scope), { maxAttempts: 8, delayMs: 100 });
}

function report(
  fault: string,
  variant: 'protected' | 'control',
  outcome: { attempts: Attempt[] },
  numbers: { effects: number; duplicates: number; lost: number; stuck: number },
) {
  const fiveXx = outcome.attempts.filter((attempt) => attempt.status >= 500).length;
  figures.push(
    `[faults/network] ${fault} | ${variant} | requests=${outcome.attempts.length} retries=${outcome.attempts.length - 1} ` +
      `effects=${numbers.effects} duplicates=${numbers.duplicates} lost_acknowledged=${numbers.lost} ` +
      `stuck_keys=${numbers.stuck} 5xx=${fiveXx} statuses=${outcome.attempts.map((a) => (a.replayed ? `${a.status}r` : a.status)).join(',')}`,
  );
}

function transactionalRouter() {
  const { t, idempotency } = createTestTRPC(app);
  const insertEffect = (db: Pick<Database, '$executeRawUnsafe'>, scope: string, key: string) => {
    const execution = randomUUID();
    return db
      .$executeRawUnsafe(
        'insert into fault_effects (scope, key, execution) values ($1, $2, $3::uuid)',
        scope,
        key,
        execution,
      )
      .then(() => ({ execution }));
  };
  const router = t.router({
    // Protected: the claim, the effect and the stored result commit together.
    pay: t.procedure
      .concat(idempotency.transactional())
      .input(inputSchema)
      .mutation(({ ctx }) => insertEffect(ctx.idempotency.tx, ctx.idempotency.scope, ctx.idempotency.key)),
    // Control: the same effect in its own transaction, no idempotency layer.
    payPlain: t.procedure
      .input(inputSchema)
      .mutation(({ ctx }) =>
        app.$transaction((tx) =>
          insertEffect(tx, ctx.principalId ?? '', ctx.headers.get('Idempotency-Key') ?? ''),
        ),
      ),
    // Control: a naive dedupe that records the key first (own commit), then runs the effect.
    payRecordFirst: t.procedure.input(inputSchema).mutation(async ({ ctx }) => {
      const scope = ctx.principalId ?? '';
      const key = ctx.headers.get('Idempotency-Key') ?? '';
      const fresh = await app.$executeRawUnsafe(
        'insert into fault_naive_keys (scope, key) values ($1, $2) on conflict do nothing',
        scope,
        key,
      );
      if (fresh === 0) return { execution: 'already-processed' };
      return app.$transaction((tx) => insertEffect(tx, scope, key));
    }),
  });
  return t.createCallerFactory(router);
}

describe('transactional mode: the COMMIT connection is cut', () => {
  it('after the server committed: the retry replays, one effect (control without the layer: a duplicate)', async () => {
    const createCaller = transactionalRouter();

    const scope = `fault:${randomUUID()}`;
    const key = randomUUID();
    proxy.arm({ statement: COMMIT, when: 'after' });
    const outcome = await send((ctx) => createCaller(ctx).pay(input), scope, key);
    expect(proxy.cuts.at(-1)).toMatchObject({ when: 'after', swallowedTag: 'COMMIT' });
    expect(outcome.ok).toBe(true);
    expect(outcome.attempts[0]?.status).toBe(500);
    expect(outcome.attempts.at(-1)).toEqual({ status: 200, replayed: true });
    const effects = await effectsOf(scope);
    expect(effects).toHaveLength(1);
    // The acknowledged (replayed) result is the committed effect.
    expect(outcome.value?.execution).toBe(effects[0]?.execution);
    expect((await keyState(scope))?.state).toBe('completed');
    report('COMMIT cut after commit (transactional)', 'protected', outcome, {
      effects: effects.length,
      duplicates: effects.length - 1,
      lost: 0,
      stuck: 0,
    });

    const controlScope = `fault:${randomUUID()}`;
    proxy.arm({ statement: COMMIT, when: 'after' });
    const control = await send((ctx) => createCaller(ctx).payPlain(input), controlScope, key);
    expect(proxy.cuts.at(-1)).toMatchObject({ when: 'after', swallowedTag: 'COMMIT' });
    expect(control.ok).toBe(true);
    const controlEffects = await effectsOf(controlScope);
    expect(controlEffects).toHaveLength(2);
    report('COMMIT cut after commit (transactional)', 'control', control, {
      effects: controlEffects.length,
      duplicates: controlEffects.length - 1,
      lost: 0,
      stuck: 0,
    });
  });

  it('before the COMMIT reached the server: rolled back, the retry runs once, the acknowledged effect exists (control "record the key first": the acknowledged write is lost)', async () => {
    const createCaller = transactionalRouter();

    const scope = `fault:${randomUUID()}`;
    const key = randomUUID();
    proxy.arm({ statement: COMMIT, when: 'before' });
    const outcome = await send((ctx) => createCaller(ctx).pay(input), scope, key);
    expect(proxy.cuts.at(-1)).toMatchObject({ when: 'before' });
    expect(outcome.ok).toBe(true);
    expect(outcome.attempts[0]?.status).toBe(500);
    expect(outcome.attempts.at(-1)).toEqual({ status: 200, replayed: false });
    const effects = await effectsOf(scope);
    expect(effects).toHaveLength(1);
    expect(outcome.value?.execution).toBe(effects[0]?.execution);
    report('COMMIT cut before commit (transactional)', 'protected', outcome, {
      effects: effects.length,
      duplicates: effects.length - 1,
      lost: 0,
      stuck: 0,
    });

    const controlScope = `fault:${randomUUID()}`;
    proxy.arm({ statement: COMMIT, when: 'before' });
    const control = await send((ctx) => createCaller(ctx).payRecordFirst(input), controlScope, key);
    expect(control.ok).toBe(true); // acknowledged …
    expect(control.value?.execution).toBe('already-processed');
    const controlEffects = await effectsOf(controlScope);
    expect(controlEffects).toHaveLength(0); // … but never written
    report('COMMIT cut before commit (transactional)', 'control', control, {
      effects: 0,
      duplicates: 0,
      lost: 1,
      stuck: 0,
    });
  });
});

/**
 * External mode. The "outside service" records one row per execution with the forwarded key (on the direct
 * connection: the proxy cuts only the idempotency store's connections).
 */
function externalRouter(options: { naiveReleaseOnError: boolean; leaseSeconds: number }) {
  const { t, idempotency, store } = createTestTRPC(app, { leaseSeconds: options.leaseSeconds });
  if (options.naiveReleaseOnError) {
    // Control: "release on any error" — frees the key even when the outcome is unknown.
    const complete = store.complete.bind(store);
    store.complete = async (key, owner, response, tx) => {
      try {
        return await complete(key, owner, response, tx);
      } catch (error) {
        await direct.$executeRawUnsafe(
          'delete from idempotency_keys where scope = $1 and procedure = $2 and key = $3',
          key.scope,
          key.procedure,
          key.key,
        );
        throw error;
      }
    };
  }
  const router = t.router({
    charge: t.procedure
      .concat(idempotency.external())
      .input(inputSchema)
      .mutation(async ({ ctx }) => {
        const execution = randomUUID();
        await direct.$executeRawUnsafe(
          'insert into fault_effects (scope, key, execution) values ($1, $2, $3::uuid)',
          ctx.idempotency.scope,
          ctx.idempotency.key,
          execution,
        );
        return { execution };
      }),
  });
  return t.createCallerFactory(router);
}

describe('external mode: the completion UPDATE connection is cut', () => {
  it('after the server applied it: unknown → not released; the retry replays; one execution (control "release on any error": a duplicate)', async () => {
    const createCaller = externalRouter({ naiveReleaseOnError: false, leaseSeconds: 30 });
    const scope = `fault:${randomUUID()}`;
    const key = randomUUID();
    proxy.arm({ statement: COMPLETE, when: 'after' });
    const outcome = await send((ctx) => createCaller(ctx).charge(input), scope, key);
    expect(proxy.cuts.at(-1)).toMatchObject({ when: 'after', swallowedTag: 'UPDATE 1' });
    expect(outcome.ok).toBe(true);
    expect(outcome.attempts.map((attempt) => attempt.status)).toEqual([500, 200]);
    expect(outcome.attempts.at(-1)?.replayed).toBe(true);
    const effects = await effectsOf(scope);
    expect(effects).toHaveLength(1);
    expect(outcome.value?.execution).toBe(effects[0]?.execution);
    report('completion UPDATE cut after apply (external)', 'protected', outcome, {
      effects: effects.length,
      duplicates: effects.length - 1,
      lost: 0,
      stuck: 0,
    });

    const naive = externalRouter({ naiveReleaseOnError: true, leaseSeconds: 30 });
    const controlScope = `fault:${randomUUID()}`;
    proxy.arm({ statement: COMPLETE, when: 'after' });
    const control = await send((ctx) => naive(ctx).charge(input), controlScope, key);
    expect(control.ok).toBe(true);
    const controlEffects = await effectsOf(controlScope);
    expect(controlEffects).toHaveLength(2);
    report('completion UPDATE cut after apply (external)', 'control', control, {
      effects: controlEffects.length,
      duplicates: controlEffects.length - 1,
      lost: 0,
      stuck: 0,
    });
  });

  it('before it reached the server: the key stays processing under its lease (409s), then one takeover; both executions carry the key (control: released at once)', async () => {
    // A lease that cannot end by itself while the test looks at the key: the test ends it (leaseEnds).
    const createCaller = externalRouter({ naiveReleaseOnError: false, leaseSeconds: 30 });
    const key = randomUUID();
    // Step by step, to look at the key between the cut and the retry.
    const scope2 = `fault:${randomUUID()}`;
    proxy.arm({ statement: COMPLETE, when: 'before' });
    const cut = await callWithRetries(
      (ctx) => createCaller(ctx).charge(input),
      () => requestContext(key, scope2),
      { maxAttempts: 1, delayMs: 0 },
    );
    expect(cut.attempts.map((attempt) => attempt.status)).toEqual([500]);
    expect(await keyState(scope2)).toEqual({ state: 'processing', lease_live: true }); // unknown: not released
    const early = await callWithRetries(
      (ctx) => createCaller(ctx).charge(input),
      () => requestContext(key, scope2),
      { maxAttempts: 1, delayMs: 0 },
    );
    expect(early.attempts).toEqual([{ status: 409, replayed: false }]); // no re-run under the lease
    await leaseEnds(scope2);
    const outcome = await send((ctx) => createCaller(ctx).charge(input), scope2, key);
    expect(outcome.ok).toBe(true);
    expect(outcome.attempts).toEqual([{ status: 200, replayed: false }]); // the takeover
    const effects = await effectsOf(scope2);
    expect(effects).toHaveLength(2); // the first execution's completion never landed: at-least-once execution …
    expect(new Set(effects.map((effect) => effect.key)).size).toBe(1); // … with the key forwarded: one effect
    expect(outcome.value?.execution).toBe(effects[1]?.execution);
    expect((await keyState(scope2))?.state).toBe('completed');
    report(
      'completion UPDATE cut before apply (external)',
      'protected',
      { attempts: [...cut.attempts, ...early.attempts, ...outcome.attempts] },
      {
        effects: new Set(effects.map((effect) => effect.key)).size,
        duplicates: 0,
        lost: 0,
        stuck: 0,
      },
    );

    const naive = externalRouter({ naiveReleaseOnError: true, leaseSeconds: 30 });
    const controlScope = `fault:${randomUUID()}`;
    proxy.arm({ statement: COMPLETE, when: 'before' });
    const controlCut = await callWithRetries(
      (ctx) => naive(ctx).charge(input),
      () => requestContext(key, controlScope),
      { maxAttempts: 1, delayMs: 0 },
    );
    expect(controlCut.attempts.map((attempt) => attempt.status)).toEqual([500]);
    expect(await keyState(controlScope)).toBeNull(); // released while the outcome was unknown
    const control = await send((ctx) => naive(ctx).charge(input), controlScope, key);
    expect(control.attempts).toEqual([{ status: 200, replayed: false }]); // re-ran at once, no lease wait
    const controlEffects = await effectsOf(controlScope);
    expect(controlEffects).toHaveLength(2);
    report(
      'completion UPDATE cut before apply (external)',
      'control',
      { attempts: [...controlCut.attempts, ...control.attempts] },
      {
        effects: new Set(controlEffects.map((effect) => effect.key)).size,
        duplicates: 0,
        lost: 0,
        stuck: 0,
      },
    );
  });
});
