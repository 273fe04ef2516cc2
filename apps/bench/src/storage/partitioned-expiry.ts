/**
 * Partitioned expiry, measured: what dropping (or detaching) a daily partition of expired keys costs, next to
 * the batched DELETE of P6 — and what partitioning does to the claim's guarantee.
 *
 * 1. `idempotency_keys_by_day`: a copy of the key table PARTITION BY RANGE (expires_at), one partition per day.
 *    Postgres refuses the primary key (scope, procedure, key) there (a unique index on a partitioned table must
 *    include the partition key), and the store's claim (`ON CONFLICT (scope, procedure, key)`) then fails; with
 *    the key widened to (scope, procedure, key, expires_at) the same key can be claimed twice. All three are
 *    checked here, not assumed. Then two expired partitions of `partitionRows` keys each are removed while a
 *    second connection claims (the widened statement) back to back: one by DROP TABLE, one by DETACH
 *    PARTITION … CONCURRENTLY + DROP TABLE.
 * 2. `idempotency_keys_by_scope`: PARTITION BY HASH (scope) keeps the primary key, so the real store claims
 *    on it unchanged — but expiry is a DELETE again, and the store's ctid-based batch delete is checked there:
 *    a ctid is only unique within one partition.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { messageOf } from '../repository.ts';
import { startClaimLoop } from './claim-probe.ts';
import type { StorageContext } from './cleanup-p6.ts';
import { lightScope, loadKeys, PROCEDURES, RETENTION_SECONDS } from './key-rows.ts';
import { formatSummary, type LatencySummary, summarize, type TimedSample, within } from './latency.ts';

const RANGE_TABLE = 'idempotency_keys_by_day';
const HASH_TABLE = 'idempotency_keys_by_scope';
const HASH_PARTITIONS = 8;
const DAY = 86_400;

export interface PartitionOperation {
  rows: number;
  loadMs: number;
  /** DROP TABLE, or DETACH … CONCURRENTLY then DROP TABLE. */
  steps: Array<{ statement: string; ms: number }>;
  totalMs: number;
  /** Claims that were running at some point during the operation. */
  overlappingClaims: LatencySummary;
}

export interface PartitionResult {
  /** What Postgres answers to the primary key (scope, procedure, key) on the range-partitioned table. */
  rangePrimaryKeyError: string;
  /** What the real store's claim gets on the range-partitioned table (with the widened key). */
  rangeStoreClaimError: string;
  /** The same key claimed twice on the widened key: rows that exist for it afterwards (1 = unique). */
  rangeDuplicateRows: number;
  drop: PartitionOperation;
  detach: PartitionOperation;
  baseline: LatencySummary;
  claimErrors: string[];
  hash: {
    partitions: number;
    /** The real store's claim, twice on one key: `claimed`, `not claimed`, or the error it got. */
    firstClaim: string;
    secondClaim: string;
    batch: number;
    /** The store's deleteExpiredBatch(batch) on the hash-partitioned table: refused (the error it threw). */
    storeRefusal: string;
    /** What it would have done: the ctid-named batch delete run by hand on that table. */
    deleted: number;
    liveBefore: number;
    liveAfter: number;
    /** The same, with a partition-safe statement (rows named by their primary key). */
    safeDeleted: number;
    safeLiveAfter: number;
  };
}

export async function benchPartitionedExpiry(context: StorageContext): Promise<PartitionResult> {
  const { client, settings, log } = context;
  const rows = settings.partitionRows;

  await client.query(`drop table if exists ${RANGE_TABLE}`);
  await client.query(
    `create table ${RANGE_TABLE} (like idempotency_keys including defaults) partition by range (expires_at)`,
  );
  const rangePrimaryKeyError = await errorOf(() =>
    client.query(`alter table ${RANGE_TABLE} add primary key (scope, procedure, key)`),
  );
  await client.query(`alter table ${RANGE_TABLE} add primary key (scope, procedure, key, expires_at)`);
  log(
    `partitions: primary key (scope, procedure, key) on a range-partitioned table → ${rangePrimaryKeyError}`,
  );

  const { rows: nowRows } = await client.query<{ base: Date }>(`select date_trunc('second', now()) as base`);
  const base = nowRows[0]?.base ?? new Date();
  const at = (seconds: number) => new Date(base.getTime() + seconds * 1000).toISOString();
  await client.query(
    `create table ${RANGE_TABLE}_old partition of ${RANGE_TABLE} for values from ('${at(-2 * DAY)}') to ('${at(-DAY)}')`,
  );
  await client.query(
    `create table ${RANGE_TABLE}_expired partition of ${RANGE_TABLE} for values from ('${at(-DAY)}') to ('${at(0)}')`,
  );
  await client.query(
    `create table ${RANGE_TABLE}_live partition of ${RANGE_TABLE} for values from ('${at(0)}') to ('${at(2 * DAY)}')`,
  );

  const rangeStoreClaimError = await errorOf(() =>
    context.storeFor(RANGE_TABLE).claim({
      scope: lightScope(1),
      procedure: PROCEDURES[0],
      key: randomUUID(),
      fingerprint: '0'.repeat(64),
      owner: randomUUID(),
      leaseSeconds: 30,
      retentionSeconds: RETENTION_SECONDS,
    }),
  );
  log(`partitions: the store's claim on it → ${rangeStoreClaimError}`);

  const common = {
    table: RANGE_TABLE,
    from: 1,
    to: rows,
    scopes: settings.scopes,
    heavyEvery: 0,
    baseTime: base,
  };
  log(`partitions: loading 2 expired daily partitions of ${rows.toLocaleString('en')} keys`);
  const expiredLoad = await loadKeys(client, {
    ...common,
    tag: 'day-1',
    expiresFromSeconds: -DAY + 1,
    expiresToSeconds: -1,
  });
  const oldLoad = await loadKeys(client, {
    ...common,
    tag: 'day-2',
    expiresFromSeconds: -2 * DAY + 1,
    expiresToSeconds: -DAY - 1,
  });
  await loadKeys(client, {
    ...common,
    to: Math.min(rows, 100_000),
    tag: 'live',
    expiresFromSeconds: 3_600,
    expiresToSeconds: DAY,
  });
  await client.query(`vacuum analyze ${RANGE_TABLE}`);

  // The claim on the widened key, from a second connection (the store cannot claim here: see above).
  const prober = new pg.Client({ connectionString: context.databaseUrl });
  prober.on('error', () => {}); // a query in flight reports it; the teardown may terminate the connection
  await prober.connect();
  const claimSql = `
    insert into ${RANGE_TABLE} as k
      (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at, replay_count)
    values ($1, $2, $3, $4, 'processing', $5::uuid, now() + interval '30 seconds', now(),
            now() + make_interval(secs => ${RETENTION_SECONDS}), 0)
    on conflict (scope, procedure, key, expires_at) do nothing
    returning 1`; // not (xmax = 0): Postgres cannot return a system column of a partitioned table
  const claimOnce = async (key: string, scope = lightScope(Math.floor(Math.random() * settings.scopes))) => {
    const started = performance.now();
    await prober.query(claimSql, [scope, PROCEDURES[0], key, '0'.repeat(64), randomUUID()]);
    return performance.now() - started;
  };

  let drop: PartitionOperation;
  let detach: PartitionOperation;
  let baseline: LatencySummary;
  const loop = startClaimLoop(() => claimOnce(randomUUID()));
  try {
    await sleep(1_000);
    const baselineFrom = performance.now();
    await sleep(3_000);
    baseline = summarize(within(loop.samples, baselineFrom, performance.now()));
    drop = await timed(client, loop.samples, rows, expiredLoad.ms, [`drop table ${RANGE_TABLE}_expired`]);
    await sleep(2_000);
    detach = await timed(client, loop.samples, rows, oldLoad.ms, [
      `alter table ${RANGE_TABLE} detach partition ${RANGE_TABLE}_old concurrently`,
      `drop table ${RANGE_TABLE}_old`,
    ]);
    await sleep(1_000);
  } finally {
    await loop.stop();
  }
  if (loop.errors.length > 0)
    throw new Error(`partitions: ${loop.errors.length} claims failed, e.g. ${loop.errors[0]}`);
  log(
    `partitions: DROP TABLE of ${rows.toLocaleString('en')} expired keys ${drop.totalMs.toFixed(1)} ms ` +
      `(claims overlapping: ${formatSummary(drop.overlappingClaims)}); DETACH CONCURRENTLY + DROP ` +
      `${detach.totalMs.toFixed(1)} ms (claims overlapping: ${formatSummary(detach.overlappingClaims)}); ` +
      `baseline claims ${formatSummary(baseline)}`,
  );

  // Two claims of one key, a few ms apart: each computes its own expires_at, so the widened key lets both in.
  const duplicateKey = randomUUID();
  const scope = lightScope(7);
  await claimOnce(duplicateKey, scope);
  await sleep(5);
  await claimOnce(duplicateKey, scope);
  const { rows: duplicates } = await client.query<{ n: number }>(
    `select count(*)::int as n from ${RANGE_TABLE} where scope = $1 and procedure = $2 and key = $3`,
    [scope, PROCEDURES[0], duplicateKey],
  );
  const rangeDuplicateRows = duplicates[0]?.n ?? -1;
  log(`partitions: one key claimed twice on the widened key → ${rangeDuplicateRows} rows for it`);
  await prober.end();
  await client.query(`drop table ${RANGE_TABLE}`);

  const hash = await hashPartitioned(context);
  return {
    rangePrimaryKeyError,
    rangeStoreClaimError,
    rangeDuplicateRows,
    drop,
    detach,
    baseline,
    claimErrors: loop.errors,
    hash,
  };
}

async function timed(
  client: pg.Client,
  samples: readonly TimedSample[],
  rows: number,
  loadMs: number,
  statements: string[],
): Promise<PartitionOperation> {
  const steps: Array<{ statement: string; ms: number }> = [];
  const from = performance.now();
  for (const statement of statements) {
    const started = performance.now();
    await client.query(statement);
    steps.push({ statement, ms: performance.now() - started });
  }
  const to = performance.now();
  const overlapping = samples.filter((sample) => sample.at < to && sample.at + sample.ms > from);
  return {
    rows,
    loadMs,
    steps,
    totalMs: to - from,
    overlappingClaims: summarize(overlapping.map((sample) => sample.ms)),
  };
}

async function hashPartitioned(context: StorageContext): Promise<PartitionResult['hash']> {
  const { client, log } = context;
  await client.query(`drop table if exists ${HASH_TABLE}`);
  await client.query(
    `create table ${HASH_TABLE} (like idempotency_keys including defaults) partition by hash (scope)`,
  );
  await client.query(`alter table ${HASH_TABLE} add primary key (scope, procedure, key)`);
  await client.query(`create index on ${HASH_TABLE} (expires_at)`);
  for (let remainder = 0; remainder < HASH_PARTITIONS; remainder += 1) {
    await client.query(
      `create table ${HASH_TABLE}_${remainder} partition of ${HASH_TABLE}
       for values with (modulus ${HASH_PARTITIONS}, remainder ${remainder})`,
    );
  }
  const store = context.storeFor(HASH_TABLE);
  const request = {
    scope: lightScope(3),
    procedure: PROCEDURES[0],
    key: randomUUID(),
    fingerprint: '0'.repeat(64),
    retentionSeconds: RETENTION_SECONDS,
    leaseSeconds: 30,
  };
  const claimOutcome = async () => {
    try {
      return (await store.claim({ ...request, owner: randomUUID() })).claimed ? 'claimed' : 'not claimed';
    } catch (error) {
      return `error: ${messageOf(error).trim().split('\n').at(-1)}`;
    }
  };
  const firstClaim = await claimOutcome();
  const secondClaim = await claimOutcome();

  // The batch delete on a partitioned table: 1 000 expired and 1 000 live keys over the partitions.
  const batch = 100;
  const live = async () =>
    (
      await client.query<{ n: number }>(
        `select count(*)::int as n from ${HASH_TABLE} where expires_at > now() and fingerprint <> $1`,
        ['0'.repeat(64)],
      )
    ).rows[0]?.n ?? -1;
  // Expired and live keys interleaved in every partition (as after vacuum lets new keys fill freed space).
  const reload = async () => {
    await client.query(`delete from ${HASH_TABLE} where fingerprint <> $1`, ['0'.repeat(64)]);
    await client.query(
      `insert into ${HASH_TABLE} (scope, procedure, key, fingerprint, state, response, http_status, expires_at)
       select 'user:' || md5('scope-' || (i % 50))::uuid, $1, md5('mixed-' || i)::uuid::text,
              md5('fp-' || i) || md5('fq-' || i), 'completed', '{}', 200,
              case when i % 2 = 0 then now() - interval '1 hour' else now() + interval '1 hour' end
       from generate_series(1, 2000) as i`,
      [PROCEDURES[0]],
    );
  };
  await reload();
  const liveBefore = await live();
  // The store refuses a partitioned table (its batch delete names rows by ctid, unique only per partition)…
  const storeRefusal = await errorOf(() => store.deleteExpiredBatch(batch));
  // …and this is what the refusal prevents: the same ctid-named delete, run by hand.
  const { rowCount: ctidDeleted } = await client.query(
    `delete from ${HASH_TABLE} where ctid in (
       select ctid from ${HASH_TABLE}
       where expires_at <= now() and not (state = 'processing' and locked_until > now())
       limit $1 for update skip locked)`,
    [batch],
  );
  const deleted = ctidDeleted ?? -1;
  const liveAfter = await live();
  // Partition-safe: name the rows by their primary key (index lookups in each partition). (tableoid, ctid) is
  // exact too, but Postgres 15 plans it as a hash join over a sequential scan of every partition.
  await reload();
  const { rowCount } = await client.query(
    `delete from ${HASH_TABLE} where (scope, procedure, key) in (
       select scope, procedure, key from ${HASH_TABLE}
       where expires_at <= now() and not (state = 'processing' and locked_until > now())
       limit $1 for update skip locked)`,
    [batch],
  );
  const safeLiveAfter = await live();
  log(
    `partitions: hash (scope) × ${HASH_PARTITIONS}: the store's claim, twice on one key → ${firstClaim}, then ` +
      `${secondClaim}; ` +
      `store.deleteExpiredBatch(${batch}) → ${storeRefusal}; the ctid delete it would run deleted ${deleted} rows, ` +
      `live keys ${liveBefore} → ${liveAfter}; ` +
      `primary-key delete: ${rowCount} rows, live keys → ${safeLiveAfter}`,
  );
  await client.query(`drop table ${HASH_TABLE}`);
  return {
    partitions: HASH_PARTITIONS,
    firstClaim,
    secondClaim,
    batch,
    storeRefusal,
    deleted,
    liveBefore,
    liveAfter,
    safeDeleted: rowCount ?? -1,
    safeLiveAfter,
  };
}

async function errorOf(operation: () => PromiseLike<unknown>): Promise<string> {
  try {
    await operation();
    return 'no error';
  } catch (error) {
    return messageOf(error).trim().split('\n').at(-1) ?? '';
  }
}
