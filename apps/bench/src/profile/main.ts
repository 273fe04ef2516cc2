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
  withIdempotencyFastPath,
} from '@idem/idempotency/prisma';
import superjson from 'superjson';
// The library's one-Sync batch (internal: not a public export), for the SQL floor of the folded transaction.
import { sendBatch } from '../../../../packages/idempotency/src/prisma/fast-path/pg-batch.ts';
import { intKnob } from '../knobs.ts';
import { INSERT_EFFECT, runEffect } from '../peers/effect.ts';
import { p50 } from '../stats.ts';
import { benchCaller, withKey } from './bench-caller.ts';
import { idemTransaction, insertTransaction, prismaIdemTransaction } from './hand-transactions.ts';
import { createProfileDatabase } from './profile-database.ts';
import { recordedStatements } from './recorded-statements.ts';

const ITERATIONS = intKnob(process.env, 'BENCH_PROFILE_ITERATIONS', 2000);
const ONLY = process.env.BENCH_PROFILE_ONLY?.split('|');

/** A 32-character secret for the encrypted-responses arm (the bench's own, not a deployment's). */
const BENCH_RESPONSE_SECRET = 'bench-response-secret-0000000001';

function profileCaller(
  db: Database,
  transformer: 'identity' | 'superjson',
  fastPath?: object,
  { encrypted = false, replayCache = null }: { encrypted?: boolean; replayCache?: ReplayCache | null } = {},
) {
  const store = createPrismaIdempotencyStore(db, fastPath ? { fastPath } : {});
  return benchCaller(db, {
    store: encrypted ? encryptStoredResponses(store, { secrets: [BENCH_RESPONSE_SECRET] }) : store,
    ...(transformer === 'superjson' ? { transformer: superjson } : {}),
    getScope: () => 'profile',
    defaults: { replayCache },
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

async function main() {
  const { url: databaseUrl, sql, drop } = await createProfileDatabase('idem_profile');
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
    const statements = await recordedStatements();
    const unnamed = profileCaller(db, 'identity');
    const prepared = profileCaller(dbPrepared, 'identity');
    const preparedSuperjson = profileCaller(dbPrepared, 'superjson');
    const fast = profileCaller(dbFast, 'identity', fastAdapter);
    const fastAdapterLevel = profileCaller(dbAdapterLevel, 'identity', adapterLevel);
    const fastEncrypted = profileCaller(dbFast, 'identity', fastAdapter, { encrypted: true });
    const fastCached = profileCaller(dbFast, 'identity', fastAdapter, {
      replayCache: createReplayCache({ maxEntries: 100_000 }),
    });
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
      'sql: BEGIN, insert, COMMIT': () => insertTransaction(sql),
      'sql: BEGIN, claim, insert, complete, COMMIT': () =>
        idemTransaction(sql, statements, { scope: 'profile-sql', procedure: 'pg.idem' }, false),
      'sql: named (prepared) claim+insert+complete': () =>
        idemTransaction(sql, statements, { scope: 'profile-sql', procedure: 'pg.idem' }, true),
      'sql: named, folded: BEGIN+claim, insert, complete+COMMIT (3 round trips)': async () => {
        const key = randomUUID();
        await sendBatch(sql, [
          { text: 'BEGIN', values: [] },
          { name: 'claim', text: statements.claim, values: claimParams(key) },
        ]);
        await sql.query({ name: 'insert', text: INSERT_EFFECT, values: [1] });
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
        prismaIdemTransaction(db, statements, { scope: 'profile-sql', procedure: 'prisma.idem' }),
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
    await db.$disconnect();
    await dbPrepared.$disconnect();
    await dbFast.$disconnect();
    await dbAdapterLevel.$disconnect();
    await drop();
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
