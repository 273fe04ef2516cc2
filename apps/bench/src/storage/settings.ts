/**
 * The storage bench's knobs (environment variables), read once. Defaults keep `pnpm bench:storage` around
 * three minutes on a 2-core machine; the 10 M-row growth step is behind BENCH_GROWTH_ROWS. `pnpm bench` passes
 * defaults of its own (options.ts): fewer sections, and shorter ones in quick mode.
 */
import { type Env, intKnob, listKnob } from '../knobs.ts';

const SECTIONS = ['p6', 'partitions', 'growth'] as const;
type StorageSection = (typeof SECTIONS)[number];

export interface CleanupVariant {
  mode: 'worker' | 'store' | 'ordered';
  /** 0 = the default batch size. */
  batch: number;
}

export interface StorageSettings {
  /** Which sections run, in this order: p6, partitions, growth. */
  sections: ReadonlySet<StorageSection>;
  /** P6: expired keys bulk-loaded before the cleanup runs. */
  p6Rows: number;
  /** P6: live (unexpired) keys loaded next to them; the cleanup must leave every one of them. */
  p6LiveRows: number;
  /** P6: batch size of the worker's cleanup; 0 = the worker's own default. */
  p6Batch: number;
  /**
   * P6: more cleanups to time, one reload of the expired keys each, as `<mode>:<batch>`: mode `worker`
   * (runCleanup, as scheduled), `store` (the library's bare batches) or `ordered` (a candidate statement, see
   * cleanup-worker.ts), e.g. "store:1000,worker:10000,ordered:1000".
   */
  p6Variants: CleanupVariant[];
  /**
   * P6: a CHECKPOINT after the expired keys are loaded (BENCH_P6_CHECKPOINT, default 1). Keys that expire were
   * written over a day, long checkpointed; a million loaded in 20 s leave ≈ 600 MB of WAL whose checkpoints
   * would still be running (and fsyncing) while the cleanup is timed. 0 keeps them: the control.
   */
  p6Checkpoint: boolean;
  /** P6: claims without cleanup before the cleanup starts (the baseline window), seconds. */
  p6BaselineSeconds: number;
  /** P6: also time the cleanup with the expires_at index dropped, giving up after this many seconds (0 = skip). */
  p6NoIndexSeconds: number;
  /** Principals the keys are spread over. */
  scopes: number;
  /** Partitioned expiry: rows in the expired daily partition that is dropped (0 = skip the section). */
  partitionRows: number;
  /** Growth: table sizes, ascending; the table grows from one to the next. */
  growthRows: number[];
  /** Growth: timed operations per figure and size. */
  growthSamples: number;
  /** Growth: one key in this many belongs to a single heavy principal (an API integration); 0 = none. */
  growthHeavyEvery: number;
  /** Growth: timed operations for the heavy principal's figures (each can take 100s of ms at 10 M rows). */
  growthHeavySamples: number;
}

/** The defaults a caller may replace (an explicit variable still wins). */
export type StorageDefaults = Pick<
  StorageSettings,
  'p6Rows' | 'p6LiveRows' | 'p6BaselineSeconds' | 'scopes' | 'growthRows' | 'growthSamples'
> & { sections: readonly StorageSection[] };

const DEFAULTS: StorageDefaults = {
  sections: SECTIONS,
  p6Rows: 1_000_000,
  p6LiveRows: 200_000,
  p6BaselineSeconds: 5,
  scopes: 100_000,
  growthRows: [10_000, 1_000_000],
  growthSamples: 1_000,
};

export function readStorageSettings(
  env: Env = process.env,
  defaults: Partial<StorageDefaults> = {},
): StorageSettings {
  const fallback = { ...DEFAULTS, ...defaults };
  const sections = listKnob(env, 'BENCH_STORAGE_SECTIONS', fallback.sections).map((section) => {
    const known = SECTIONS.find((name) => name === section);
    if (!known)
      throw new Error(`BENCH_STORAGE_SECTIONS: unknown section ${section} (${SECTIONS.join(', ')})`);
    return known;
  });
  const growthRows = listKnob(env, 'BENCH_GROWTH_ROWS', fallback.growthRows.map(String)).map((raw) =>
    parseCount('BENCH_GROWTH_ROWS', raw),
  );
  if (growthRows.some((rows, index) => index > 0 && rows <= (growthRows[index - 1] ?? 0)))
    throw new Error('BENCH_GROWTH_ROWS must be ascending, e.g. 10000,1000000,10000000');
  return {
    sections: new Set(sections),
    p6Rows: intKnob(env, 'BENCH_P6_ROWS', fallback.p6Rows),
    p6LiveRows: intKnob(env, 'BENCH_P6_LIVE_ROWS', fallback.p6LiveRows),
    p6Batch: intKnob(env, 'BENCH_P6_BATCH', 0),
    p6Variants: listKnob(env, 'BENCH_P6_VARIANTS', []).map(parseVariant),
    p6Checkpoint: intKnob(env, 'BENCH_P6_CHECKPOINT', 1) !== 0,
    p6BaselineSeconds: intKnob(env, 'BENCH_P6_BASELINE_SECONDS', fallback.p6BaselineSeconds),
    p6NoIndexSeconds: intKnob(env, 'BENCH_P6_NO_INDEX_SECONDS', 0),
    scopes: Math.max(1, intKnob(env, 'BENCH_STORAGE_SCOPES', fallback.scopes)),
    partitionRows: intKnob(env, 'BENCH_PARTITION_ROWS', 1_000_000),
    growthRows,
    growthSamples: Math.max(20, intKnob(env, 'BENCH_GROWTH_SAMPLES', fallback.growthSamples)),
    growthHeavyEvery: intKnob(env, 'BENCH_GROWTH_HEAVY_EVERY', 100),
    growthHeavySamples: Math.max(20, intKnob(env, 'BENCH_GROWTH_HEAVY_SAMPLES', 200)),
  };
}

function parseVariant(raw: string): CleanupVariant {
  const [mode, batch = '0'] = raw.split(':');
  if (mode !== 'worker' && mode !== 'store' && mode !== 'ordered')
    throw new Error(`BENCH_P6_VARIANTS: ${raw} is not <worker|store|ordered>:<batch size>`);
  return { mode, batch: batch === '0' ? 0 : parseCount('BENCH_P6_VARIANTS', batch) };
}

function parseCount(name: string, raw: string): number {
  const value = Number(raw.replaceAll('_', ''));
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${name}: ${raw} is not a positive integer`);
  return value;
}
