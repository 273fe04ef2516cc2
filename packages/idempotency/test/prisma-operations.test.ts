/**
 * The key operations (`createIdempotencyKeyOperations`) against real Postgres, on the library's own table in a
 * scratch schema: finding keys, counting the processing ones, evicting with a version check and an audit hook in
 * the same transaction, and the batched cleanup with a per-batch callback in each batch's transaction.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logKeyHash } from '../src/core/log-key-hash.ts';
import type { RecordKey } from '../src/index.ts';
import {
  createIdempotencyKeyOperations,
  createPrismaIdempotencyStore,
  idempotencyKeysSchema,
} from '../src/prisma/index.ts';
import { connectWithOwnTable, sleep, uniqueScope, uniqueTableName } from './support/db.ts';

let db: Database;
let keys: ReturnType<typeof createIdempotencyKeyOperations<Database>>;
beforeAll(async () => {
  db = await connectWithOwnTable();
  keys = createIdempotencyKeyOperations(db);
});
afterAll(async () => {
  await db.$disconnect();
});

const shapes = {
  completed: `'completed', '{"kind":"output","httpStatus":200,"body":"{}"}', 200, null, null, now() + interval '1 day'`,
  inFlight: `'processing', null, null, gen_random_uuid(), now() + interval '1 minute', now() + interval '1 day'`,
  stuck: `'processing', null, null, gen_random_uuid(), now() - interval '1 second', now() + interval '1 day'`,
  expiredCompleted: `'completed', '{}', 200, null, null, now() - interval '1 second'`,
  expiredLiveLease: `'processing', null, null, gen_random_uuid(), now() + interval '1 minute', now() - interval '1 second'`,
} as const;
type Shape = keyof typeof shapes;

async function insertKey(shape: Shape, key: Partial<RecordKey> = {}, table = 'idempotency_keys') {
  const ref: RecordKey = {
    scope: key.scope ?? uniqueScope(),
    procedure: key.procedure ?? 'test.ops',
    key: key.key ?? randomUUID(),
  };
  await db.$executeRawUnsafe(
    `insert into "${table}" (scope, procedure, key, fingerprint, state, response, http_status, lease_owner,
       locked_until, expires_at)
     values ($1, $2, $3, repeat('f', 64), ${shapes[shape]})`,
    ref.scope,
    ref.procedure,
    ref.key,
  );
  return ref;
}

async function exists(ref: RecordKey): Promise<boolean> {
  const rows = await db.$queryRawUnsafe<Array<{ n: number }>>(
    'select count(*)::int as n from idempotency_keys where scope = $1 and procedure = $2 and key = $3',
    ref.scope,
    ref.procedure,
    ref.key,
  );
  return rows[0]?.n === 1;
}

/** An eviction that records nothing. */
const noAudit = async () => undefined;

const refOf = (row: RecordKey) => ({ scope: row.scope, procedure: row.procedure, key: row.key });

describe('finding keys', () => {
  it('by key, key prefix (LIKE wildcards taken literally), principal and procedure', async () => {
    const scope = uniqueScope();
    const prefix = `p_${randomUUID()}`;
    const a = await insertKey('completed', { scope, key: `${prefix}-a` });
    const b = await insertKey('inFlight', { scope, key: `${prefix}-b`, procedure: 'test.other' });
    // Would match the prefix if `_` were a LIKE wildcard: control for the escaping.
    await insertKey('completed', { scope, key: `pX${prefix.slice(2)}-c` });

    expect((await keys.findKeys({ key: a.key })).map(refOf)).toEqual([a]);
    expect((await keys.findKeys({ keyPrefix: prefix })).map((row) => row.key).sort()).toEqual([a.key, b.key]);
    // `%` is literal too: this prefix matches no stored key.
    expect(await keys.findKeys({ keyPrefix: `${prefix}%` })).toEqual([]);
    expect((await keys.findKeys({ scope })).length).toBe(3);
    expect((await keys.findKeys({ scope, procedure: 'test.other' })).map(refOf)).toEqual([b]);
    expect((await keys.findKeys({ scope: [scope, uniqueScope()] })).length).toBe(3);
    expect(await keys.findKeys({ scope }, { limit: 2 })).toHaveLength(2);
    await expect(keys.findKeys({ scope }, { limit: 0 })).rejects.toThrow(RangeError);

    const found = await keys.findKey(a);
    expect(found).toMatchObject({
      ...a,
      state: 'completed',
      status: 'completed',
      httpStatus: 200,
      responseBytes: 46,
      expired: false,
      keyHash: logKeyHash(a.scope, a.key),
    });
    expect(found).not.toHaveProperty('response');
    expect(await keys.findKey({ ...a, key: 'absent' })).toBeNull();
  });

  it('by the log key hash, equal to logKeyHash for quotes, backslashes, control characters and non-ASCII text', async () => {
    const scope = `${uniqueScope()} "quoted" \\ é`;
    const awkward = [
      'plain',
      'quo"te',
      'back\\slash',
      'tab\there',
      'new\nline',
      'bell\u0007',
      'ünï 😀',
      'sep\u2028',
      'bs\b ff\f cr\r us\u001f del\u007f',
      'nbsp\u00a0 bom\ufeff last\uffff',
      'astral \u{10ffff}',
    ];
    for (const key of awkward) await insertKey('completed', { scope, key });
    for (const key of awkward) {
      const hash = logKeyHash(scope, key);
      const found = await keys.findKeys({ keyHash: hash.toUpperCase() });
      expect(found.map((row) => row.key)).toEqual([key]);
      expect(found[0]?.keyHash).toBe(hash);
    }
    // Control: a hash of another key finds nothing.
    expect(await keys.findKeys({ keyHash: logKeyHash(scope, 'not stored') })).toEqual([]);
  });

  it('by status, judged by the database clock; countProcessing counts the same', async () => {
    const scope = uniqueScope();
    const inFlight = await insertKey('inFlight', { scope });
    const stuck = await insertKey('stuck', { scope });
    await insertKey('completed', { scope });
    const rows = await keys.findKeys({ scope });
    expect(Object.fromEntries(rows.map((row) => [row.key, row.status]))).toEqual({
      [inFlight.key]: 'in_flight',
      [stuck.key]: 'stuck',
      [rows.find((row) => row.state === 'completed')?.key ?? '']: 'completed',
    });
    expect((await keys.findKeys({ status: 'stuck' }, { limit: 500 })).map((row) => row.key)).toContain(
      stuck.key,
    );
    expect((await keys.findKeys({ status: 'in_flight' }, { limit: 500 })).map((row) => row.key)).toContain(
      inFlight.key,
    );

    // A private table makes the counts exact.
    const table = uniqueTableName('ops_counts');
    await db.$executeRawUnsafe(idempotencyKeysSchema(table).statements[0] ?? '');
    const counted = createIdempotencyKeyOperations(db, { table });
    expect(await counted.countProcessing()).toEqual({ inFlight: 0, stuck: 0 });
    for (const shape of ['inFlight', 'inFlight', 'stuck', 'completed', 'expiredLiveLease'] as const)
      await insertKey(shape, {}, table);
    expect(await counted.countProcessing()).toEqual({ inFlight: 3, stuck: 1 });
    expect(counted.table).toBe(table);
  });

  it('every key without a filter, newest first by default, latest expiry first on request; a limit of 1 is one row', async () => {
    // A private table: "every key" is then exactly these three. Creation and expiry run in different orders.
    const table = uniqueTableName('ops_order');
    await db.$executeRawUnsafe(idempotencyKeysSchema(table).statements[0] ?? '');
    const ops = createIdempotencyKeyOperations(db, { table });
    const scope = uniqueScope();
    const insert = (key: string, state: string, createdAgo: string, expiresIn: string) =>
      db.$executeRawUnsafe(
        `insert into "${table}" (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at,
           expires_at)
         values ($1, 'test.ops', $2, repeat('f', 64), $3, gen_random_uuid(), now() + interval '1 minute',
           now() - $4::interval, now() + $5::interval)`,
        scope,
        key,
        state,
        createdAgo,
        expiresIn,
      );
    await insert('oldest', 'completed', '3 minutes', '3 days');
    await insert('middle', 'processing', '2 minutes', '1 day');
    await insert('newest', 'completed', '1 minute', '2 days');

    const keysOf = (rows: Array<{ key: string }>) => rows.map((row) => row.key);
    expect(keysOf(await ops.findKeys())).toEqual(['newest', 'middle', 'oldest']);
    expect(keysOf(await ops.findKeys(undefined, { order: 'newest' }))).toEqual([
      'newest',
      'middle',
      'oldest',
    ]);
    expect(keysOf(await ops.findKeys(undefined, { order: 'latest-expiry' }))).toEqual([
      'oldest',
      'newest',
      'middle',
    ]);
    expect(keysOf(await ops.findKeys({ scope }, { limit: 1 }))).toEqual(['newest']);
    await expect(ops.findKeys({ scope }, { limit: 0 })).rejects.toThrow('limit must be at least 1, got 0');
    await expect(ops.findKeys({ scope }, { limit: Number.NaN })).rejects.toThrow(RangeError);
    // A processing row reads back as processing (and in flight: its lease runs for another minute).
    expect(await ops.findKey({ scope, procedure: 'test.ops', key: 'middle' })).toMatchObject({
      state: 'processing',
      status: 'in_flight',
    });
  });
});

describe('evicting a key', () => {
  it('a stuck key goes without confirmation; the audit hook runs in the same transaction', async () => {
    const ref = await insertKey('stuck');
    const seen = await keys.findKey(ref);
    const result = await keys.evict({
      key: ref,
      version: seen?.version ?? '',
      confirmed: false,
      audit: async (tx, eviction) => {
        // Inside the eviction's transaction: the row is already gone there.
        const rows = await tx.$queryRawUnsafe<Array<{ n: number }>>(
          'select count(*)::int as n from idempotency_keys where scope = $1',
          ref.scope,
        );
        return { rowsSeenByAudit: rows[0]?.n, rule: eviction.rule, owner: eviction.before.leaseOwner };
      },
    });
    expect(result).toMatchObject({
      evicted: true,
      rule: 'lease_expired',
      audit: { rowsSeenByAudit: 0, rule: 'lease_expired', owner: seen?.leaseOwner },
    });
    expect(await exists(ref)).toBe(false);
    expect(
      await keys.evict({ key: ref, version: seen?.version ?? '', confirmed: true, audit: noAudit }),
    ).toEqual({
      evicted: false,
      reason: 'gone',
      row: null,
    });
  });

  it('a failing audit hook rolls the delete back (control: with a working hook the same eviction deletes)', async () => {
    const ref = await insertKey('stuck');
    const version = (await keys.findKey(ref))?.version ?? '';
    await expect(
      keys.evict({
        key: ref,
        version,
        confirmed: false,
        audit: () => Promise.reject(new Error('audit store down')),
      }),
    ).rejects.toThrow('audit store down');
    expect(await exists(ref)).toBe(true);
    expect(await keys.evict({ key: ref, version, confirmed: false, audit: noAudit })).toMatchObject({
      evicted: true,
    });
    expect(await exists(ref)).toBe(false);
  });

  it('a live or completed key needs confirmation; a key that moved on since it was seen is refused', async () => {
    for (const shape of ['inFlight', 'completed'] as const) {
      const ref = await insertKey(shape);
      const version = (await keys.findKey(ref))?.version ?? '';
      let audited = 0;
      const audit = async () => {
        audited += 1;
      };
      expect(await keys.evict({ key: ref, version, confirmed: false, audit })).toMatchObject({
        evicted: false,
        reason: 'unconfirmed',
        row: { status: shape === 'inFlight' ? 'in_flight' : 'completed' },
      });
      expect([await exists(ref), audited]).toEqual([true, 0]);
      expect(await keys.evict({ key: ref, version, confirmed: true, audit })).toMatchObject({
        evicted: true,
        rule: 'confirmed',
      });
      expect([await exists(ref), audited]).toEqual([false, 1]);
    }

    // Claimed again by a new owner after the admin looked: the version no longer matches.
    const ref = await insertKey('stuck');
    const seen = await keys.findKey(ref);
    await db.$executeRawUnsafe(
      `update idempotency_keys set lease_owner = gen_random_uuid(), locked_until = now() + interval '30 seconds'
       where scope = $1 and procedure = $2 and key = $3`,
      ref.scope,
      ref.procedure,
      ref.key,
    );
    expect(
      await keys.evict({ key: ref, version: seen?.version ?? '', confirmed: true, audit: noAudit }),
    ).toMatchObject({
      evicted: false,
      reason: 'changed',
      row: { status: 'in_flight' },
    });
    expect(await exists(ref)).toBe(true);
  });
});

describe('evicting at the same time', () => {
  it('two admins evicting the same version: one eviction, one audit, the other finds it gone', async () => {
    const ref = await insertKey('stuck');
    const version = (await keys.findKey(ref))?.version ?? '';
    let audits = 0;
    const evict = () =>
      keys.evict({
        key: ref,
        version,
        confirmed: false,
        audit: async () => {
          audits += 1;
        },
      });
    const results = await Promise.all([evict(), evict()]);
    expect(results.map((result) => (result.evicted ? 'evicted' : result.reason)).sort()).toEqual([
      'evicted',
      'gone',
    ]);
    expect(audits).toBe(1);
  });
});

describe('a schema-qualified table', () => {
  it('the store and the operations work on `schema.table` built from its own DDL', async () => {
    const schemaName = uniqueTableName('ops_schema');
    const table = `${schemaName}.keys`;
    await db.$executeRawUnsafe(`create schema "${schemaName}"`);
    for (const statement of idempotencyKeysSchema(table).statements) await db.$executeRawUnsafe(statement);
    const store = createPrismaIdempotencyStore(db, { table });
    const ops = createIdempotencyKeyOperations(db, { table });
    const ref = { scope: uniqueScope(), procedure: 'test.ops', key: randomUUID() };
    const claimed = await store.claim({
      ...ref,
      fingerprint: 'b'.repeat(64),
      owner: randomUUID(),
      leaseSeconds: 30,
      retentionSeconds: 60,
    });
    expect(claimed).toEqual({ claimed: true, takeover: false });
    expect(await ops.findKey(ref)).toMatchObject({ status: 'in_flight' });
    expect(await ops.countProcessing()).toEqual({ inFlight: 1, stuck: 0 });
    expect(await ops.deleteExpired({ batchSize: 10 })).toEqual({ deleted: 0, batches: 1 });
    // The unqualified table of this connection is another table: the key is not there.
    expect(await keys.findKey(ref)).toBeNull();
  });
});

describe('deleting expired keys', () => {
  it('in batches, never a live lease, with onBatch in each batch transaction (a failing onBatch keeps its batch)', async () => {
    const table = uniqueTableName('ops_cleanup');
    for (const statement of idempotencyKeysSchema(table).statements) await db.$executeRawUnsafe(statement);
    await db.$executeRawUnsafe(`create table "${table}_log" (deleted int not null)`);
    const ops = createIdempotencyKeyOperations(db, { table });
    for (let i = 0; i < 7; i += 1) await insertKey('expiredCompleted', {}, table);
    await insertKey('expiredLiveLease', {}, table);
    await insertKey('completed', {}, table);
    const remaining = async () =>
      (await db.$queryRawUnsafe<Array<{ n: number }>>(`select count(*)::int as n from "${table}"`))[0]?.n;

    // A callback that fails on the first batch: that batch's delete is rolled back with it.
    await expect(
      ops.deleteExpired({ batchSize: 3, onBatch: () => Promise.reject(new Error('counter down')) }),
    ).rejects.toThrow('counter down');
    expect(await remaining()).toBe(9);

    const result = await ops.deleteExpired({
      batchSize: 3,
      onBatch: async (tx, deleted) => {
        await tx.$executeRawUnsafe(`insert into "${table}_log" values ($1)`, deleted);
      },
    });
    expect(result).toEqual({ deleted: 7, batches: 3 });
    const log = await db.$queryRawUnsafe<Array<{ deleted: number }>>(`select deleted from "${table}_log"`);
    expect(log.map((row) => row.deleted)).toEqual([3, 3, 1]);
    expect(await remaining()).toBe(2);
    // Without a callback: plain batches; nothing left to delete.
    expect(await ops.deleteExpired({ batchSize: 3 })).toEqual({ deleted: 0, batches: 1 });
    await expect(ops.deleteExpired({ batchSize: 0 })).rejects.toThrow(RangeError);
  });

  it('maxBatches stops after that many batches, expired keys left for the next run', async () => {
    const table = uniqueTableName('ops_max_batches');
    await db.$executeRawUnsafe(idempotencyKeysSchema(table).statements[0] ?? '');
    const ops = createIdempotencyKeyOperations(db, { table });
    for (let i = 0; i < 7; i += 1) await insertKey('expiredCompleted', {}, table);
    expect(await ops.deleteExpired({ batchSize: 3, maxBatches: 1 })).toEqual({ deleted: 3, batches: 1 });
    expect(await ops.deleteExpired({ batchSize: 3, maxBatches: 1, onBatch: async () => {} })).toEqual({
      deleted: 3,
      batches: 1,
    });
    expect(await ops.deleteExpired({ batchSize: 3 })).toEqual({ deleted: 1, batches: 1 });
    await expect(ops.deleteExpired({ batchSize: 0 })).rejects.toThrow(
      'batchSize must be a positive integer, got 0',
    );
  });

  it('a batch whose onBatch outlasts batchTimeoutMs is rolled back (well within Prisma’s own 5 s default)', async () => {
    const table = uniqueTableName('ops_batch_timeout');
    await db.$executeRawUnsafe(idempotencyKeysSchema(table).statements[0] ?? '');
    const ops = createIdempotencyKeyOperations(db, { table });
    for (let i = 0; i < 2; i += 1) await insertKey('expiredCompleted', {}, table);
    const remaining = async () =>
      (await db.$queryRawUnsafe<Array<{ n: number }>>(`select count(*)::int as n from "${table}"`))[0]?.n;

    await expect(
      ops.deleteExpired({ batchSize: 10, batchTimeoutMs: 200, onBatch: () => sleep(1_500) }),
    ).rejects.toThrow(/The timeout for this transaction was 200 ms/);
    expect(await remaining()).toBe(2);
    // Control: the same slow batch within its bound commits.
    expect(
      await ops.deleteExpired({ batchSize: 10, batchTimeoutMs: 20_000, onBatch: () => sleep(1_500) }),
    ).toEqual({ deleted: 2, batches: 1 });
    expect(await remaining()).toBe(0);
  });

  it('on a pool of ONE connection: each batch transaction holds it, so nothing in a batch may need another', async () => {
    // The worker's cleanup and the P6 bench run on small pools; a query outside the batch's transaction (the
    // first batch's partitioned-table check once was one) would wait for the connection its own transaction
    // holds, until the transaction timed out, and no batch would ever commit.
    const single = await connectWithOwnTable(1);
    try {
      const ops = createIdempotencyKeyOperations(single);
      for (let i = 0; i < 4; i += 1)
        await single.$executeRawUnsafe(
          `insert into idempotency_keys (scope, procedure, key, fingerprint, state, response, http_status,
             lease_owner, locked_until, expires_at)
           values ($1, 'test.ops', $2, repeat('f', 64), ${shapes.expiredCompleted})`,
          uniqueScope(),
          randomUUID(),
        );
      const batches: number[] = [];
      const result = await ops.deleteExpired({
        batchSize: 3,
        batchTimeoutMs: 5_000,
        onBatch: async (tx, deleted) => {
          await tx.$queryRawUnsafe('select 1');
          batches.push(deleted);
        },
      });
      expect(result).toEqual({ deleted: 4, batches: 2 });
      expect(batches).toEqual([3, 1]);
    } finally {
      await single.$disconnect();
    }
  });

  it('the store and the operations share one table: what the store claims, the operations see', async () => {
    const store = createPrismaIdempotencyStore(db);
    const ref = { scope: uniqueScope(), procedure: 'test.ops', key: randomUUID() };
    const owner = randomUUID();
    await store.claim({ ...ref, fingerprint: 'a'.repeat(64), owner, leaseSeconds: 30, retentionSeconds: 60 });
    expect(await keys.findKey(ref)).toMatchObject({ status: 'in_flight', leaseOwner: owner });
    expect(await store.renewLease?.(ref, owner, 60)).toBe(true);
    expect(await store.renewLease?.(ref, randomUUID(), 60)).toBe(false); // fenced: not the owner
    expect(createPrismaIdempotencyStore(db, { leaseRenewal: false }).renewLease).toBeUndefined();
  });
});
