/**
 * Growth: the claim and the replay read as `idempotency_keys` grows (default 10 k → 1 M rows; 10 M behind
 * BENCH_GROWTH_ROWS). The table starts empty and is filled step by step with live completed keys (one
 * generate_series statement per step, indexes maintained as rows go in), then VACUUM ANALYZE — the state
 * autovacuum leaves — and its size is read.
 *
 * Timed at every size through the real store, one connection, the operations round-robin so each sees the
 * same machine:
 *   claim.new          a first execution: claim a fresh key (default per-principal cap) of a typical principal
 *                      (and complete.new: the completion that follows it);
 *   claim.new.nocap    the same with maxInFlightPerScope = Infinity (the statement without the in-flight count);
 *   claim.new.heavy    a fresh key of the one heavy principal that holds 1/heavyEvery of all keys;
 *   replay.find        store.find of an existing completed key picked at random (cold pages included);
 *   replay.claim       store.claim of an existing completed key: the replay path of a duplicate request;
 *   replay.claim.heavy the same for a key of the heavy principal.
 * Every figure is taken twice, with the partial index on keys in flight as migrated and toggled (dropped if the
 * migrations have it, created if not), in alternating blocks: without it, the claim's in-flight count walks every
 * key of the principal.
 */
import { performance } from 'node:perf_hooks';
import { claimAndComplete } from './claim-probe.ts';
import { batchPlan, dropExpiresAtIndex, type StorageContext } from './cleanup-p6.ts';
import {
  HEAVY_SCOPE,
  keyOf,
  lightScope,
  loadKeys,
  PROCEDURES,
  procedureOf,
  RETENTION_SECONDS,
  scopeOf,
} from './key-rows.ts';
import { formatSummary, type LatencySummary, summarize } from './latency.ts';
import { formatBytes, measureTableSize, type TableSize } from './table-size.ts';

const TABLE = 'idempotency_keys';
const TAG = 'growth';
/** The index that serves the claim's in-flight count. */
export const IN_FLIGHT_INDEX = {
  name: 'idempotency_keys_in_flight_idx',
  definition: `create index idempotency_keys_in_flight_idx on ${TABLE} (scope, state)`,
};

export interface GrowthStep {
  rows: number;
  /** This step's rows (target − previous) and how long their one INSERT … SELECT took. */
  loadedRows: number;
  loadMs: number;
  vacuumMs: number;
  size: TableSize;
  keysPerScope: number;
  heavyScopeKeys: number;
  /** Figures with the schema as migrated. */
  figures: Record<string, LatencySummary>;
  /** Whether the migrated schema has the in-flight partial index. */
  inFlightIndexMigrated: boolean;
  /** The claims again with that index toggled (created when the migrations lack it, else dropped). */
  toggled: { indexBuildMs: number; figures: Record<string, LatencySummary> };
  /**
   * One store.deleteExpiredBatch(1000) when nothing has expired — the last batch of every cleanup run, and every
   * batch of a run that finds nothing — with the expires_at index and with it dropped.
   */
  emptyBatch: { withIndex: EmptyBatch; withoutIndex: EmptyBatch; indexRebuildMs: number };
}

export interface EmptyBatch {
  ms: number;
  plan: string;
}

export async function benchGrowth(context: StorageContext): Promise<GrowthStep[]> {
  const { client, settings, log } = context;
  await client.query(`truncate ${TABLE}`);
  await client.query(`vacuum ${TABLE}`);
  const inFlightIndexMigrated = await hasIndex(context, IN_FLIGHT_INDEX.name);
  const steps: GrowthStep[] = [];
  let current = 0;
  for (const target of settings.growthRows) {
    log(`growth: loading keys ${(current + 1).toLocaleString('en')}…${target.toLocaleString('en')}`);
    const load = await loadKeys(client, {
      table: TABLE,
      tag: TAG,
      from: current + 1,
      to: target,
      scopes: settings.scopes,
      heavyEvery: settings.growthHeavyEvery,
      expiresFromSeconds: 3_600,
      expiresToSeconds: RETENTION_SECONDS,
    });
    current = target;
    const vacuumStarted = performance.now();
    await client.query(`vacuum analyze ${TABLE}`);
    const vacuumMs = performance.now() - vacuumStarted;
    const size = await measureTableSize(client, TABLE);
    log(
      `growth: ${target.toLocaleString('en')} rows loaded in ${(load.ms / 1000).toFixed(1)} s ` +
        `(+ vacuum analyze ${(vacuumMs / 1000).toFixed(1)} s); ${formatBytes(size.totalBytes)} ` +
        `(${size.bytesPerRow.toFixed(0)} B/row: heap ${formatBytes(size.heapBytes)}, indexes ${Object.entries(
          size.indexBytes,
        )
          .map(([name, bytes]) => `${name} ${formatBytes(bytes)}`)
          .join(', ')})`,
    );

    const { figures, toggled } = await compareInFlightIndex(context, target, inFlightIndexMigrated);
    report(log, target, 'as migrated', figures);
    report(
      log,
      target,
      inFlightIndexMigrated ? 'without the in-flight index' : 'with the in-flight partial index',
      toggled.figures,
    );

    const emptyBatch = await timeEmptyBatch(context);
    log(
      `growth: ${target.toLocaleString('en')} rows, a cleanup batch with nothing expired: ` +
        `${emptyBatch.withIndex.ms.toFixed(2)} ms (${emptyBatch.withIndex.plan}); without the expires_at index ` +
        `${emptyBatch.withoutIndex.ms.toFixed(1)} ms (${emptyBatch.withoutIndex.plan})`,
    );

    const heavyEvery = settings.growthHeavyEvery;
    steps.push({
      rows: target,
      loadedRows: load.rows,
      loadMs: load.ms,
      vacuumMs,
      size,
      keysPerScope: (heavyEvery > 0 ? target - Math.floor(target / heavyEvery) : target) / settings.scopes,
      heavyScopeKeys: heavyEvery > 0 ? Math.floor(target / heavyEvery) : 0,
      figures,
      inFlightIndexMigrated,
      toggled,
      emptyBatch,
    });
  }
  return steps;
}

/** One timed operation; returns its figures by name (ms). */
type Probe = () => Promise<Record<string, number>>;

/** Alternating blocks: even ones with the schema as migrated, odd ones with the in-flight index toggled. */
const BLOCKS = 4;

/**
 * Times every probe with and without the in-flight partial index, in alternating blocks (ABAB) so that both see
 * the same machine: the "before" and "after" of an index are never measured minutes apart.
 */
async function compareInFlightIndex(
  context: StorageContext,
  rows: number,
  migrated: boolean,
): Promise<Pick<GrowthStep, 'figures' | 'toggled'>> {
  const { client, settings } = context;
  const probes = probesFor(context, rows);
  const asMigrated = new Map<string, number[]>();
  const toggled = new Map<string, number[]>();
  let indexBuildMs = Number.NaN;
  const setIndex = async (present: boolean) => {
    const started = performance.now();
    await client.query(present ? IN_FLIGHT_INDEX.definition : `drop index ${IN_FLIGHT_INDEX.name}`);
    if (present && Number.isNaN(indexBuildMs)) indexBuildMs = performance.now() - started;
    await client.query(`analyze ${TABLE}`);
  };
  const pairs = BLOCKS / 2;
  const samples = Math.ceil(settings.growthSamples / pairs);
  const heavySamples = Math.ceil(Math.min(settings.growthSamples, settings.growthHeavySamples) / pairs);
  for (let block = 0; block < BLOCKS; block += 1) {
    const isToggled = block % 2 === 1;
    if (block > 0) await setIndex(isToggled !== migrated);
    await timeProbes(probes, isToggled ? toggled : asMigrated, samples, heavySamples);
  }
  await setIndex(migrated); // BLOCKS is even: the last block ran toggled
  const summaries = (latencies: Map<string, number[]>) =>
    Object.fromEntries([...latencies].map(([name, list]) => [name, summarize(list)]));
  return { figures: summaries(asMigrated), toggled: { indexBuildMs, figures: summaries(toggled) } };
}

/** The operations timed at every size (see the header), each naming its figures. */
function probesFor(context: StorageContext, rows: number): Record<string, Probe> {
  const { settings, store } = context;
  const heavyEvery = settings.growthHeavyEvery;
  const randomIndex = () => 1 + Math.floor(Math.random() * rows);
  const randomLight = () => {
    for (;;) {
      const i = randomIndex();
      if (heavyEvery === 0 || i % heavyEvery !== 0) return i;
    }
  };
  const randomHeavy = () => heavyEvery * (1 + Math.floor(Math.random() * Math.floor(rows / heavyEvery)));
  const existing = (i: number) => ({
    scope: scopeOf(i, settings.scopes, heavyEvery),
    procedure: procedureOf(i),
    key: keyOf(TAG, i),
  });
  const anyProcedure = () => PROCEDURES[Math.floor(Math.random() * PROCEDURES.length)] ?? PROCEDURES[0];
  const fresh = (scope: string) => ({ scope, procedure: anyProcedure() });
  const replay = async (i: number) => {
    const { ms, claimed } = await claimAndComplete(store, existing(i));
    if (claimed) throw new Error(`growth: replay of existing key #${i} claimed it (the key was not there)`);
    return ms;
  };
  const randomLightScope = () => lightScope(Math.floor(Math.random() * settings.scopes));

  const probes: Record<string, Probe> = {
    'claim.new': async () => {
      const { ms, completeMs } = await claimAndComplete(store, fresh(randomLightScope()));
      return { 'claim.new': ms, 'complete.new': completeMs };
    },
    'claim.new.nocap': async () => ({
      'claim.new.nocap': (await claimAndComplete(store, { ...fresh(randomLightScope()), cap: null })).ms,
    }),
    'replay.find': async () => {
      const started = performance.now();
      const record = await store.find(existing(randomLight()));
      const ms = performance.now() - started;
      if (record?.state !== 'completed') throw new Error('growth: replay.find did not find a completed key');
      return { 'replay.find': ms };
    },
    'replay.claim': async () => ({ 'replay.claim': await replay(randomLight()) }),
  };
  if (heavyEvery > 0 && rows >= heavyEvery) {
    probes['claim.new.heavy'] = async () => ({
      'claim.new.heavy': (await claimAndComplete(store, fresh(HEAVY_SCOPE))).ms,
    });
    probes['replay.claim.heavy'] = async () => ({ 'replay.claim.heavy': await replay(randomHeavy()) });
  }
  return probes;
}

/**
 * Runs the probes round-robin `samples` times after a short untimed warm-up, adding their figures to `into`.
 * The heavy principal's probes (`*.heavy`) run only `heavySamples` times, spread evenly over the block.
 */
async function timeProbes(
  probes: Record<string, Probe>,
  into: Map<string, number[]>,
  samples: number,
  heavySamples: number,
): Promise<void> {
  const warmup = Math.min(20, Math.ceil(samples / 10));
  for (let sample = -warmup; sample < samples; sample += 1) {
    for (const [probeName, probe] of Object.entries(probes)) {
      if (probeName.endsWith('.heavy')) {
        const turn = Math.floor((sample * heavySamples) / samples);
        const previousTurn = Math.floor(((sample - 1) * heavySamples) / samples);
        if (sample < -2 || (sample >= 0 && turn === previousTurn)) continue;
      }
      const figures = await probe();
      if (sample < 0) continue;
      for (const [name, ms] of Object.entries(figures)) {
        const list = into.get(name) ?? [];
        list.push(ms);
        into.set(name, list);
      }
    }
  }
}

function report(
  log: (line: string) => void,
  rows: number,
  label: string,
  figures: Record<string, LatencySummary>,
): void {
  for (const [name, summary] of Object.entries(figures)) {
    log(`growth: ${rows.toLocaleString('en')} rows, ${label}: ${name.padEnd(18)} ${formatSummary(summary)}`);
  }
}

async function timeEmptyBatch(context: StorageContext): Promise<GrowthStep['emptyBatch']> {
  const { client, store } = context;
  const once = async (): Promise<EmptyBatch> => {
    const plan = await batchPlan(client);
    const started = performance.now();
    const deleted = await store.deleteExpiredBatch(1_000);
    const ms = performance.now() - started;
    if (deleted !== 0) throw new Error(`growth: ${deleted} keys had expired (none should have)`);
    return { ms, plan };
  };
  await once(); // warm: plan cache, connection
  const runs = [await once(), await once(), await once()].sort((a, b) => a.ms - b.ms);
  const withIndex = runs[1] ?? runs[0] ?? { ms: Number.NaN, plan: '?' };
  const recreate = await dropExpiresAtIndex(client);
  let withoutIndex: EmptyBatch;
  const rebuilt = { ms: Number.NaN };
  try {
    withoutIndex = await once();
  } finally {
    const started = performance.now();
    await client.query(recreate);
    rebuilt.ms = performance.now() - started;
  }
  return { withIndex, withoutIndex, indexRebuildMs: rebuilt.ms };
}

async function hasIndex(context: StorageContext, name: string): Promise<boolean> {
  const { rows } = await context.client.query(
    'select 1 from pg_indexes where tablename = $1 and indexname = $2',
    [TABLE, name],
  );
  return rows.length > 0;
}
