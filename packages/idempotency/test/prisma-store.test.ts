/**
 * The Postgres store on the real Postgres (a scratch schema of this file's own): the store contract every engine
 * keeps (support/store-contract.ts), then what is Postgres' own: the claim's lock_timeout set in its own
 * statement, the replay read that takes no row lock, and cleanup's batch-size guard and refusal of a partitioned
 * table (its ctid-named batch delete).
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PrismaTransactionLike } from '../src/prisma/index.ts';
import { cleanupExpiredKeys, createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, deferred, uniqueTableName } from './support/db.ts';
import { postgresRows } from './support/postgres-rows.ts';
import { describeStoreContract, type StoreBackend } from './support/store-contract.ts';
import { claimRequest, keyOf, output } from './support/store-fixtures.ts';

let db: Database;
let store: ReturnType<typeof createPrismaIdempotencyStore<Database>>;

beforeAll(async () => {
  db = await connectWithOwnTable();
  store = createPrismaIdempotencyStore(db);
});
afterAll(async () => {
  await db.$disconnect();
});

describeStoreContract(
  'Postgres',
  (): StoreBackend<PrismaTransactionLike<Database>> => ({
    ...postgresRows(db),
    store,
    // A pool: another connection reads while a transaction holds one.
    observer: store,
    createStore: (options) => createPrismaIdempotencyStore(db, options),
    // timestamptz keeps microseconds, and its differences are exact.
    durationTolerance: 0,
    validTableNames: ['idempotency_keys', 'public.idempotency_keys'],
  }),
);

describe("the claim's lock_timeout", () => {
  it("the claim sets the transaction's lock_timeout itself, for that transaction only", async () => {
    const request = claimRequest();
    const [inside] = await store.transaction(
      async (tx) => {
        await store.claim(request, tx);
        return tx.$queryRawUnsafe<Array<{ lock_timeout: string }>>(
          `select current_setting('lock_timeout') as lock_timeout`,
        );
      },
      { lockTimeoutMs: 1_234, timeoutMs: 5_000 },
    );
    expect(inside?.lock_timeout).toBe('1234ms');
    const [after] = await db.$queryRawUnsafe<Array<{ lock_timeout: string }>>(
      `select current_setting('lock_timeout') as lock_timeout`,
    );
    expect(after?.lock_timeout).toBe('0');
  });
});

describe('replay read', () => {
  it('takes no row lock: a duplicate of a completed key answers while another transaction locks the row (control: ON CONFLICT DO UPDATE … WHERE false waits)', async () => {
    const request = claimRequest();
    await store.claim(request);
    await store.complete(keyOf(request), request.owner, output);
    const locked = deferred();
    const release = deferred();
    const holder = db.$transaction(
      async (tx) => {
        await tx.$queryRawUnsafe(
          'select 1 from idempotency_keys where scope = $1 and procedure = $2 and key = $3 for update',
          request.scope,
          request.procedure,
          request.key,
        );
        locked.resolve();
        await release.promise;
      },
      { timeout: 10_000 },
    );
    await locked.promise;
    try {
      const duplicate = await store.transaction(
        (tx) => store.claim({ ...request, owner: randomUUID() }, tx),
        {
          lockTimeoutMs: 300,
          timeoutMs: 5_000,
        },
      );
      expect(duplicate).toMatchObject({ claimed: false, record: { state: 'completed', response: output } });

      // Control: the claim as it was written before (the conflict arm locks the row even when its WHERE is
      // false) waits for the holder and gives up at the lock timeout.
      const control = await db
        .$transaction(async (tx) => {
          await tx.$executeRawUnsafe('set local lock_timeout = 300');
          return tx.$queryRawUnsafe(
            `insert into idempotency_keys as k (scope, procedure, key, fingerprint, state, created_at, expires_at)
             values ($1, $2, $3, $4, 'processing', now(), now() + interval '1 hour')
             on conflict (scope, procedure, key) do update set state = excluded.state where false
             returning 1`,
            request.scope,
            request.procedure,
            request.key,
            request.fingerprint,
          );
        })
        .then(
          () => null,
          (error: unknown) => error,
        );
      expect(store.isLockTimeout(control)).toBe(true);
    } finally {
      release.resolve();
      await holder;
    }
  });
});

describe('cleanup', () => {
  it('rejects a batch size that is not a positive integer (0 used to loop forever)', async () => {
    let calls = 0;
    const counting = {
      deleteExpiredBatch: async () => {
        calls += 1;
        if (calls > 5) throw new Error('still looping');
        return 0;
      },
    };
    for (const batchSize of [0, -1, 1.5, Number.NaN])
      await expect(cleanupExpiredKeys(counting, { batchSize })).rejects.toThrow(RangeError);
    expect(calls).toBe(0);
    // Control: a valid size runs one (empty) batch.
    expect(await cleanupExpiredKeys(counting, { batchSize: 10 })).toEqual({ deleted: 0, batches: 1 });
    expect(calls).toBe(1);
  });

  it('refuses a partitioned key table (a ctid is unique only per partition); control: the ctid delete hits a live key', async () => {
    const table = uniqueTableName('parted_keys');
    const probe = `${table}_probe`;
    const createParted = async (name: string) => {
      await db.$executeRawUnsafe(
        `create table "${name}" (like idempotency_keys including defaults, primary key (scope, procedure, key))
         partition by hash (scope)`,
      );
      for (const remainder of [0, 1])
        await db.$executeRawUnsafe(
          `create table "${name}_${remainder}" partition of "${name}" for values with (modulus 2, remainder ${remainder})`,
        );
    };
    try {
      await createParted(table);
      await createParted(probe);
      // Two scopes that hash to different partitions (found on a probe table, so the real one gets exactly one
      // row per partition, each at ctid (0,1)).
      await db.$executeRawUnsafe(
        `insert into "${probe}" (scope, procedure, key, fingerprint, state, created_at, expires_at)
         select 'partition-' || i, 'p', 'k', 'f', 'completed', now(), now() from generate_series(1, 20) i`,
      );
      const [expired, live] = (
        await db.$queryRawUnsafe<Array<{ scope: string }>>(
          `select distinct on (tableoid) scope from "${probe}" order by tableoid, scope`,
        )
      ).map((row) => row.scope);
      await db.$executeRawUnsafe(
        `insert into "${table}" (scope, procedure, key, fingerprint, state, created_at, expires_at)
         values ($1, 'p', 'k', 'f', 'completed', now(), now() - interval '1 second'),
                ($2, 'p', 'k', 'f', 'completed', now(), now() + interval '1 day')`,
        expired,
        live,
      );
      const count = async () =>
        (await db.$queryRawUnsafe<Array<{ n: number }>>(`select count(*)::int as n from "${table}"`))[0]?.n;

      const parted = createPrismaIdempotencyStore(db, { table });
      await expect(parted.deleteExpiredBatch(100)).rejects.toThrow(/partitioned/);
      expect(await count()).toBe(2);

      // Control: the ctid-named batch delete on this table also deletes the LIVE key sharing the slot (0,1).
      await db.$executeRawUnsafe(
        `delete from "${table}" where ctid in (select ctid from "${table}" where expires_at <= now() limit 100)`,
      );
      expect(await count()).toBe(0);
    } finally {
      await db.$executeRawUnsafe(`drop table if exists "${table}", "${probe}"`);
    }
  });
});
