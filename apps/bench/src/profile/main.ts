/**
 * `pnpm bench:profile`: where Idem's added cost goes, piece by piece, in ONE process at one connection
 * (no HTTP, no Next). Every arm below is run once per iteration, the arms' order rotating every iteration, so
 * that all of them see the same machine; each figure is the arm's p50 over BENCH_PROFILE_ITERATIONS.
 *
 * SQL arms (node-pg, no ORM): the unprotected transaction and Idem's statements with one round trip each, and
 * Idem's statements the way the store sends them now. Prisma arms: the same statements through
 * `$transaction` + `$queryRawUnsafe`. tRPC arms: the bench procedures through `createCaller`, the real
 * middleware and store. JavaScript arms: the request's own CPU work (fingerprint, serialising the result,
 * UUIDs). Run it under `node --cpu-prof` for the shares inside one arm (BENCH_PROFILE_ONLY=<arm>); several
 * arms side by side: BENCH_PROFILE_ONLY='<arm>|<arm>' (each a part of an arm's name).
 */
import { createHash, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createPrismaClient, type Database, pgAdapter } from '@idem/db';
import {
  createReplayCache,
  encryptStoredResponses,
  fingerprintRequest,
  type ReplayCache,
} from '@idem/idempotency';
import { traceIdempotency } from '@idem/idempotency/otel';
import {
  createPrismaIdempotencyStore,
  idempotencyStatementName,
  type PrismaTransactionLike,
  withIdempotencyFastPath,
} from '@idem/idempotency/prisma';
import { createIdempotency } from '@idem/idempotency/trpc';
import { initTRPC } from '@trpc/server';
import pg from 'pg';
import superjson from 'superjson';
import { z } from 'zod';
// The library's one-Sync batch (internal: not a public export), for the SQL floor of the folded transaction.
import { sendBatch } from '../../../../packages/idempotency/src/prisma/fast-path/pg-batch.ts';
import { intKnob } from '../knobs.ts';
import { insertEffect, runEffect } from '../peers/effect.ts';
import {
  createDatabase,
  dropDatabase,
  migrateDatabase,
  scratchDatabaseName,
  useExternalServer,
} from '../repository.ts';
import { recordedStatements } from './recorded-statements.ts';

const ITERATIONS = intKnob(process.env, 'BENCH_PROFILE_ITERATIONS', 2000);
const ONLY = process.env.BENCH_PROFILE_ONLY?.split('|');

interface BenchContext {
  headers: Headers;
}

/** A 32-character secret for the encrypted-responses arm (the bench's own, not a deployment's). */
const BENCH_RESPONSE_SECRET = 'bench-response-secret-0000000001';

function createRouter(
  db: Database,
  transformer: 'identity' | 'superjson',
  fastPath?: object,
  { encrypted = false, replayCache = null }: { encrypted?: boolean; replayCache?: ReplayCache | null } = {},
) {
  const t = initTRPC.context<BenchContext>().create();
  const store = createPrismaIdempotencyStore(db, fastPath ? { fastPath } : {});
  const idempotency = createIdempotency<BenchContext, PrismaTransactionLike<Database>>({
    store: encrypted ? encryptStoredResponses(store, { secrets: [BENCH_RESPONSE_SECRET] }) : store,
    ...(transformer === 'superjson' ? { transformer: superjson } : {}),
    getScope: () => 'profile',
    getRequestHeaders: (ctx) => ctx.headers,
    defaults: { replayCache },
  });
  const input = z.object({ n: z.number().int() });
  return t.router({
    unprotected: t.procedure.input(input).mutation(({ input }) => runEffect(db, input.n)),
    protected: t.procedure
      .concat(idempotency.transactional())
      .input(input)
      .mutation(({ ctx, input }) => insertEffect(ctx.idempotency.tx, input.n)),
  });
}

/** `factory` whose adapters do not show their pg pool: the fast path then stays at the adapter level. */
function withoutPool<TFactory extends { connect(): Promise<object> }>(factory: TFactory): TFactory {
  return new Proxy(factory, {
    get(target, property, receiver) {
      if (property !== 'connect') return Reflect.get(target, property, receiver);
      return async () =>
        new Proxy(await target.connect(), {
          get: (adapter, name, adapterReceiver) =>
            name === 'underlyingDriver' ? () => undefined : Reflect.get(adapter, name, adapterReceiver),
        });
    },
  });
}

function p50(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function main() {
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const name = scratchDatabaseName('idem_profile');
  const databaseUrl = await createDatabase(server.adminUrl, name);
  const sql = new pg.Client({ connectionString: databaseUrl });
  const db = createPrismaClient({ connectionString: databaseUrl, max: 2 });
  // The app's configuration: the store's statements prepared once per connection.
  const dbPrepared = createPrismaClient({
    connectionString: databaseUrl,
    max: 2,
    statementName: idempotencyStatementName,
  });
  // The store's statements straight to the adapter (withIdempotencyFastPath), unnamed and prepared.
  const fastAdapter = withIdempotencyFastPath(pgAdapter({ connectionString: databaseUrl, max: 2 }));
  const dbFast = createPrismaClient({ adapter: fastAdapter });
  // The fast path with the pool hidden from it (the adapter-level fast path before round trips were folded):
  // every statement through the adapter transaction, one round trip each.
  const adapterLevel = withIdempotencyFastPath(
    withoutPool(pgAdapter({ connectionString: databaseUrl, max: 2 })),
  );
  const dbAdapterLevel = createPrismaClient({ adapter: adapterLevel });
  try {
    await migrateDatabase(databaseUrl);
    await sql.connect();
    await sql.query(
      'create table bench_effects (id bigserial primary key, n int, at timestamptz default now())',
    );
    const statements = await recordedStatements();
    const unnamed = createRouter(db, 'identity').createCaller;
    const prepared = createRouter(dbPrepared, 'identity').createCaller;
    const preparedSuperjson = createRouter(dbPrepared, 'superjson').createCaller;
    const fast = createRouter(dbFast, 'identity', fastAdapter).createCaller;
    const fastAdapterLevel = createRouter(dbAdapterLevel, 'identity', adapterLevel).createCaller;
    const fastEncrypted = createRouter(dbFast, 'identity', fastAdapter, { encrypted: true }).createCaller;
    const fastCached = createRouter(dbFast, 'identity', fastAdapter, {
      replayCache: createReplayCache({ maxEntries: 100_000 }),
    }).createCaller;
    const withKey = (key: string) => ({ headers: new Headers({ 'idempotency-key': key }) });
    const replayKeys: string[] = [];
    const primeKey = () => {
      const key = randomUUID();
      replayKeys.push(key);
      return key;
    };
    let replayIndex = 0;

    const claimParams = (key: string, procedure = 'pg.idem') =>
      statements.claimParams('profile-sql', procedure, key);
    const arms: Record<string, () => Promise<unknown> | unknown> = {
      'sql: select 1': () => sql.query('select 1'),
      'sql: BEGIN, insert, COMMIT': async () => {
        await sql.query('begin');
        await sql.query('insert into bench_effects (n) values ($1) returning id, at', [1]);
        await sql.query('commit');
      },
      'sql: BEGIN, claim, insert, complete, COMMIT': async () => {
        const key = randomUUID();
        await sql.query('begin');
        await sql.query(statements.claim, claimParams(key));
        await sql.query('insert into bench_effects (n) values ($1) returning id, at', [1]);
        await sql.query(statements.complete, statements.completeParams('profile-sql', 'pg.idem', key));
        await sql.query('commit');
      },
      'sql: named (prepared) claim+insert+complete': async () => {
        const key = randomUUID();
        await sql.query('begin');
        await sql.query({ name: 'claim', text: statements.claim, values: claimParams(key) });
        await sql.query({
          name: 'insert',
          text: 'insert into bench_effects (n) values ($1) returning id, at',
          values: [1],
        });
        await sql.query({
          name: 'complete',
          text: statements.complete,
          values: statements.completeParams('profile-sql', 'pg.idem', key),
        });
        await sql.query('commit');
      },
      'sql: named, folded: BEGIN+claim, insert, complete+COMMIT (3 round trips)': async () => {
        const key = randomUUID();
        await sendBatch(sql, [
          { text: 'BEGIN', values: [] },
          { name: 'claim', text: statements.claim, values: claimParams(key) },
        ]);
        await sql.query({
          name: 'insert',
          text: 'insert into bench_effects (n) values ($1) returning id, at',
          values: [1],
        });
        await sendBatch(sql, [
          {
            name: 'complete',
            text: statements.complete,
            values: statements.completeParams('profile-sql', 'pg.idem', key),
          },
          { text: 'COMMIT', values: [] },
        ]);
      },
      'sql: claim alone (unnamed)': () => sql.query(statements.claim, claimParams(randomUUID(), 'alone')),
      'sql: claim alone (named)': () =>
        sql.query({
          name: 'claim-alone',
          text: statements.claim,
          values: claimParams(randomUUID(), 'alone'),
        }),
      'sql: bare insert … on conflict do nothing (unnamed)': () =>
        sql.query(
          `insert into idempotency_keys (scope, procedure, key, fingerprint, state, lease_owner, locked_until,
             created_at, expires_at, replay_count)
           values ($1, $2, $3, $4, 'processing', $5::uuid, now() + make_interval(secs => $6::double precision), now(),
             now() + make_interval(secs => $7::double precision), 0)
           on conflict (scope, procedure, key) do nothing returning 1`,
          ['profile-bare', 'bare', randomUUID(), 'f'.repeat(64), randomUUID(), 30, 86_400],
        ),
      'prisma: $queryRawUnsafe select 1': () => db.$queryRawUnsafe('select 1'),
      'prisma: $transaction(insert)': () => runEffect(db, 1),
      'prisma: $transaction(claim, insert, complete)': () =>
        db.$transaction(async (tx) => {
          const key = randomUUID();
          await tx.$queryRawUnsafe(statements.claim, ...claimParams(key, 'prisma.idem'));
          await insertEffect(tx, 1);
          await tx.$executeRawUnsafe(
            statements.complete,
            ...statements.completeParams('profile-sql', 'prisma.idem', key),
          );
        }),
      'trpc: unprotected': () => prepared(withKey(randomUUID())).unprotected({ n: 1 }),
      'trpc: protected, unnamed statements (first execution)': () =>
        unnamed(withKey(randomUUID())).protected({ n: 1 }),
      'trpc: protected (first execution)': () => prepared(withKey(primeKey())).protected({ n: 1 }),
      'trpc: protected (replay)': () => {
        const key = replayKeys[replayIndex++];
        return prepared(withKey(key ?? primeKey())).protected({ n: 1 });
      },
      'trpc: protected, fast path (first execution) — the defaults': () =>
        fast(withKey(randomUUID())).protected({ n: 1 }),
      'trpc: protected, fast path at the adapter level, unnamed (first execution)': () =>
        fastAdapterLevel(withKey(randomUUID())).protected({ n: 1 }),
      'trpc: protected, fast path (replay)': () => {
        const key = replayKeys[Math.max(0, replayIndex - 3)];
        return fast(withKey(key ?? primeKey())).protected({ n: 1 });
      },
      'trpc: protected, fast path, responses encrypted (first execution)': () =>
        fastEncrypted(withKey(randomUUID())).protected({ n: 1 }),
      'trpc: protected, fast path, responses encrypted (replay)': async () => {
        const key = randomUUID();
        await fastEncrypted(withKey(key)).protected({ n: 1 });
        const t0 = performance.now();
        await fastEncrypted(withKey(key)).protected({ n: 1 });
        return { measuredMs: performance.now() - t0 };
      },
      'trpc: protected, fast path, replay cache (first execution)': () =>
        fastCached(withKey(randomUUID())).protected({ n: 1 }),
      // The key's first duplicate reads the database and fills the cache; the one timed is answered from memory.
      'trpc: protected, fast path, replay cache (replay from memory)': async () => {
        const key = randomUUID();
        await fastCached(withKey(key)).protected({ n: 1 });
        await fastCached(withKey(key)).protected({ n: 1 });
        const t0 = performance.now();
        await fastCached(withKey(key)).protected({ n: 1 });
        return { measuredMs: performance.now() - t0 };
      },
      // Tracing on with no SDK registered (spans are no-ops): what `traceIdempotency()` costs by itself. The arm
      // subscribes and unsubscribes around its own call, so its figure is an upper bound.
      'trpc: protected, fast path, traced with no SDK (first execution)': async () => {
        const stop = traceIdempotency();
        try {
          await fast(withKey(randomUUID())).protected({ n: 1 });
        } finally {
          stop();
        }
      },
      'trpc: protected, superjson (first execution)': () =>
        preparedSuperjson(withKey(randomUUID())).protected({ n: 1 }),
      'js: fingerprint': () => fingerprintRequest('bench.protected', { n: 1 }),
      'js: randomUUID': () => randomUUID(),
      'js: superjson result + JSON.stringify': () =>
        JSON.stringify(superjson.serialize({ id: 123, at: new Date() })),
      'js: sha256 of 64 bytes': () => createHash('sha256').update('x'.repeat(64)).digest('hex'),
    };
    const names = Object.keys(arms).filter((arm) => !ONLY || ONLY.some((part) => arm.includes(part)));
    // Replays need first executions to replay: the first-execution arm runs before the replay arm in every
    // rotation because replays pick keys in the order they were primed (a shortfall primes a fresh key).
    for (let warm = 0; warm < 200; warm += 1) for (const arm of names) await arms[arm]?.();
    replayIndex = replayKeys.length;
    const times = new Map<string, number[]>(names.map((arm) => [arm, []]));
    const started = Date.now();
    for (let i = 0; i < ITERATIONS; i += 1) {
      const order = [...names.slice(i % names.length), ...names.slice(0, i % names.length)];
      for (const arm of order) {
        const t0 = performance.now();
        const result = await arms[arm]?.();
        // An arm that has to prepare inside its call (a key to replay) times the part it measures itself.
        times.get(arm)?.push(measuredOf(result) ?? performance.now() - t0);
      }
      if ((i + 1) % 500 === 0) {
        const left = ((Date.now() - started) / (i + 1)) * (ITERATIONS - i - 1);
        console.error(`[profile] ${i + 1}/${ITERATIONS}, ~${Math.round(left / 1000)} s left`);
      }
    }
    console.log('| arm | p50 ms |');
    console.log('|---|---|');
    for (const arm of names) console.log(`| ${arm} | ${p50(times.get(arm) ?? []).toFixed(4)} |`);
  } finally {
    await sql.end().catch(() => {});
    await db.$disconnect();
    await dbPrepared.$disconnect();
    await dbFast.$disconnect();
    await dbAdapterLevel.$disconnect();
    await dropDatabase(server.adminUrl, name);
  }
}

function measuredOf(result: unknown): number | undefined {
  if (result && typeof result === 'object' && 'measuredMs' in result && typeof result.measuredMs === 'number')
    return result.measuredMs;
  return undefined;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
