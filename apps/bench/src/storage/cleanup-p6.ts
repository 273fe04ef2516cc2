/**
 * P6: the cleanup of 1 M expired keys, and what it does to claims running at the same time.
 *
 * Loads `p6Rows` expired keys and `p6LiveRows` live ones into the real `idempotency_keys`, VACUUM ANALYZE (the
 * steady state autovacuum leaves), then runs the cleanup in its own process exactly as the worker does while
 * this process claims fresh keys back to back through the real store: `baseline` = the claims of the
 * `p6BaselineSeconds` before the cleanup starts (same processes, cleanup idle), `during` = the claims that
 * started while it ran. Checks afterwards that no expired key is left and every live key is still there.
 * Variants (other batch sizes, the library's bare batches, no expires_at index) reload the expired keys first.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { claimAndComplete, type Store, startClaimLoop } from './claim-probe.ts';
import { type CleanupOutcome, startCleanupProcess } from './cleanup-process.ts';
import { lightScope, loadKeys, PROCEDURES, RETENTION_SECONDS } from './key-rows.ts';
import { formatSummary, type LatencySummary, summarize, type TimedSample, within } from './latency.ts';
import type { CleanupVariant, StorageSettings } from './settings.ts';

const TABLE = 'idempotency_keys';
/** Live keys expire between 1 h and 24 h from now: none may expire while the bench runs. */
const LIVE_FROM_SECONDS = 3_600;
const PROBE_FINGERPRINT = '0'.repeat(64);

export interface StorageContext {
  databaseUrl: string;
  /** A plain pg connection to the scratch database (loads, DDL, checks). */
  client: pg.Client;
  /** The real store on a Prisma client of one connection (the probes). */
  store: Store;
  /** The real store on another table of the same database (same Prisma client). */
  storeFor(table: string): Store;
  settings: StorageSettings;
  log: (line: string) => void;
}

export interface CleanupRun {
  label: string;
  variant: CleanupVariant;
  expiresAtIndex: boolean;
  /** Plan of the batch's row source (mirrors the store's statement): e.g. "Index Scan" or "Seq Scan". */
  plan: string;
  loadedExpired: number;
  loadMs: number;
  vacuumMs: number;
  /** The CHECKPOINT after the load (settings.p6Checkpoint); undefined when there was none (the control). */
  checkpointMs: number | undefined;
  /** The claims during that CHECKPOINT (and 1 s more): a forced checkpoint of the load's writes, no cleanup. */
  loadCheckpoint: LatencySummary | undefined;
  /** undefined when it did not finish within the limit. */
  cleanup: CleanupOutcome | undefined;
  limitSeconds: number | undefined;
  /** WAL written while the cleanup ran (the claims running beside it included: a few hundred KB). */
  walBytes: number;
  /** Expired rows left afterwards (0 when it finished). */
  expiredLeft: number;
  liveKept: number;
  liveExpected: number;
  baseline: LatencySummary;
  during: LatencySummary;
  /** Wall-clock start of the slowest claim during the cleanup (to match against the server log's checkpoints). */
  worstDuringAt: string | undefined;
  /**
   * The claims while a CHECKPOINT forced right after the cleanup writes out and fsyncs what it dirtied (and 1 s
   * more): the server's share of the cleanup, at its harshest — the checkpoint the cleanup's WAL starts on its
   * own spreads the same writes over minutes.
   */
  after: LatencySummary;
  afterSeconds: number;
  /** How long that CHECKPOINT took. */
  afterCheckpointMs: number;
  worstAfterAt: string | undefined;
  claimErrors: string[];
}

export interface P6Result {
  loadedLive: number;
  liveLoadMs: number;
  runs: CleanupRun[];
}

export async function benchCleanup(context: StorageContext): Promise<P6Result> {
  const { client, settings, log } = context;
  log(`P6: loading ${settings.p6LiveRows.toLocaleString('en')} live keys`);
  const live = await loadKeys(client, {
    table: TABLE,
    tag: 'live',
    from: 1,
    to: settings.p6LiveRows,
    scopes: settings.scopes,
    heavyEvery: 0,
    expiresFromSeconds: LIVE_FROM_SECONDS,
    expiresToSeconds: RETENTION_SECONDS,
  });
  const runs: CleanupRun[] = [];
  const worker: CleanupVariant = { mode: 'worker', batch: settings.p6Batch };
  runs.push(await cleanupRun(context, 'worker, default batch', worker, runs.length, true));
  for (const variant of settings.p6Variants) {
    const label = `${variant.mode}, batch ${variant.batch || 'default'}`;
    runs.push(await cleanupRun(context, label, variant, runs.length, true));
  }
  if (settings.p6NoIndexSeconds > 0) {
    runs.push(await cleanupRun(context, 'worker, no expires_at index', worker, runs.length, false));
  }
  return { loadedLive: live.rows, liveLoadMs: live.ms, runs };
}

async function cleanupRun(
  context: StorageContext,
  label: string,
  variant: CleanupVariant,
  run: number,
  withIndex: boolean,
): Promise<CleanupRun> {
  const { client, settings, log } = context;
  log(`P6 [${label}]: loading ${settings.p6Rows.toLocaleString('en')} expired keys`);
  const expired = await loadKeys(client, {
    table: TABLE,
    tag: `expired-${run}`,
    from: 1,
    to: settings.p6Rows,
    scopes: settings.scopes,
    heavyEvery: 0,
    // Expired over the last day, oldest first (the order they were written in).
    expiresFromSeconds: -RETENTION_SECONDS,
    expiresToSeconds: -60,
  });
  const dropped = withIndex ? undefined : await dropExpiresAtIndex(client);
  const vacuumStarted = performance.now();
  await client.query(`vacuum analyze ${TABLE}`);
  const vacuumMs = performance.now() - vacuumStarted;
  const plan = await batchPlan(client, variant.mode === 'ordered');
  const loop = startClaimLoop(async () => {
    const scope = lightScope(Math.floor(Math.random() * settings.scopes));
    const procedure = PROCEDURES[Math.floor(Math.random() * PROCEDURES.length)] ?? PROCEDURES[0];
    return (await claimAndComplete(context.store, { scope, procedure })).ms;
  });
  // The load's own WAL checkpointed now (see settings.p6Checkpoint), so the checkpoints the cleanup meets are
  // the ones its own WAL starts. The claims already run: during this forced checkpoint of what the LOAD dirtied
  // (no cleanup yet) they show what any forced checkpoint of that size costs a commit on this disk — the control
  // for the one forced after the cleanup.
  const checkpointStarted = performance.now();
  if (settings.p6Checkpoint) await client.query('checkpoint');
  const checkpointMs = settings.p6Checkpoint ? performance.now() - checkpointStarted : undefined;
  await sleep(1_000);
  const loadCheckpoint = settings.p6Checkpoint
    ? summarize(within(loop.samples, checkpointStarted, performance.now()))
    : undefined;
  log(
    `P6 [${label}]: loaded in ${(expired.ms / 1000).toFixed(1)} s, vacuum analyze ${(vacuumMs / 1000).toFixed(1)} s, ` +
      `${checkpointMs === undefined ? 'no checkpoint' : `checkpoint ${(checkpointMs / 1000).toFixed(1)} s`}` +
      `${loadCheckpoint ? ` (claims during it and 1 s more: ${formatSummary(loadCheckpoint)})` : ''}; batch plan: ${plan}`,
  );

  const limitSeconds = withIndex ? undefined : settings.p6NoIndexSeconds;
  const cleaner = await startCleanupProcess(context.databaseUrl, variant);
  let cleanup: CleanupOutcome | undefined;
  let baselineFrom = 0;
  let walBefore = 0;
  let walBytes = Number.NaN;
  let goAt = 0;
  let doneAt = 0;
  let afterTo = 0;
  let afterCheckpointMs = Number.NaN;
  try {
    await sleep(1_000); // warm-up, not counted
    baselineFrom = performance.now();
    await sleep(settings.p6BaselineSeconds * 1_000);
    walBefore = await walPosition(client);
    goAt = performance.now();
    cleanup = await cleaner.run(limitSeconds === undefined ? undefined : limitSeconds * 1_000);
    doneAt = performance.now();
    walBytes = (await walPosition(client)) - walBefore;
    const checkpointFrom = performance.now();
    await client.query('checkpoint');
    afterCheckpointMs = performance.now() - checkpointFrom;
    await sleep(1_000);
    afterTo = performance.now();
  } finally {
    await loop.stop();
    await cleaner.stop();
    if (dropped) await client.query(dropped);
  }

  const { rows } = await client.query<{ expired_left: number; live_kept: number }>(
    `select count(*) filter (where expires_at <= now())::int as expired_left,
            count(*) filter (where expires_at > now() and fingerprint <> $1)::int as live_kept
     from ${TABLE}`,
    [PROBE_FINGERPRINT],
  );
  const result: CleanupRun = {
    label,
    variant,
    expiresAtIndex: withIndex,
    plan,
    loadedExpired: expired.rows,
    loadMs: expired.ms,
    vacuumMs,
    checkpointMs,
    loadCheckpoint,
    cleanup,
    limitSeconds,
    walBytes,
    expiredLeft: rows[0]?.expired_left ?? -1,
    liveKept: rows[0]?.live_kept ?? -1,
    liveExpected: settings.p6LiveRows,
    baseline: summarize(within(loop.samples, baselineFrom, goAt)),
    during: summarize(within(loop.samples, goAt, doneAt)),
    worstDuringAt: worstStart(loop.samples, goAt, doneAt),
    after: summarize(within(loop.samples, doneAt, afterTo)),
    afterSeconds: (afterTo - doneAt) / 1000,
    afterCheckpointMs,
    worstAfterAt: worstStart(loop.samples, doneAt, afterTo),
    claimErrors: loop.errors,
  };
  log(
    `P6 [${label}]: ${
      cleanup
        ? `deleted ${cleanup.deleted.toLocaleString('en')} in ${(cleanup.ms / 1000).toFixed(2)} s (${cleanup.batches} batches, ` +
          `${(walBytes / 1e6).toFixed(0)} MB of WAL)`
        : `did NOT finish within ${limitSeconds} s (${result.expiredLeft.toLocaleString('en')} expired rows left)`
    }; claims baseline ${formatSummary(result.baseline)}; during ${formatSummary(result.during)} ` +
      `(slowest at ${result.worstDuringAt}); its checkpoint (${(afterCheckpointMs / 1000).toFixed(1)} s, forced) ` +
      `${formatSummary(result.after)} ` +
      `(slowest at ${result.worstAfterAt}); ` +
      `live keys kept ${result.liveKept}/${result.liveExpected}; claim errors ${loop.errors.length}`,
  );
  if (cleanup && result.expiredLeft !== 0) throw new Error(`P6: ${result.expiredLeft} expired rows left`);
  if (result.liveKept !== result.liveExpected)
    throw new Error(`P6: the cleanup removed live keys (${result.liveKept}/${result.liveExpected} left)`);
  return result;
}

function worstStart(samples: readonly TimedSample[], from: number, to: number): string | undefined {
  let worst: TimedSample | undefined;
  for (const sample of samples) {
    if (sample.at >= from && sample.at < to && (!worst || sample.ms > worst.ms)) worst = sample;
  }
  return worst ? new Date(performance.timeOrigin + worst.at).toISOString() : undefined;
}

/** Drops the index whose only column is expires_at; returns the statement that recreates it. */
export async function dropExpiresAtIndex(client: pg.Client): Promise<string> {
  const { rows } = await client.query<{ name: string; definition: string }>(
    `select indexname as name, indexdef as definition from pg_indexes
     where tablename = $1 and indexdef ~ '\\(expires_at\\)$'`,
    [TABLE],
  );
  const index = rows[0];
  if (!index) throw new Error(`P6: no index on ${TABLE}(expires_at) to drop`);
  await client.query(`drop index "${index.name}"`);
  return index.definition;
}

/**
 * The plan of the batch's row source, as the store's deleteExpiredBatch selects it (with `ordered`: as the
 * candidate statement of cleanup-worker.ts does, ORDER BY expires_at).
 */
export async function batchPlan(client: pg.Client, ordered = false): Promise<string> {
  const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
    `explain (format json) select ctid from ${TABLE}
     where expires_at <= now() and not (state = 'processing' and locked_until > now())
     ${ordered ? 'order by expires_at' : ''} limit 1000 for update skip locked`,
  );
  const names: string[] = [];
  let node: PlanNode | undefined = rows[0]?.['QUERY PLAN'][0]?.Plan;
  while (node) {
    names.push(node['Index Name'] ? `${node['Node Type']} using ${node['Index Name']}` : node['Node Type']);
    node = node.Plans?.[0];
  }
  return names.join(' → ');
}

/** The server's current WAL position, in bytes. */
async function walPosition(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ lsn: string }>(`select pg_current_wal_lsn() - '0/0'::pg_lsn as lsn`);
  return Number(rows[0]?.lsn ?? Number.NaN);
}

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}
