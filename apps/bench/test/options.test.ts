/** `pnpm bench`'s knobs: the defaults, quick mode's, an explicit value over both, and a bad value refused. */
import { describe, expect, it } from 'vitest';
import { parseBenchOptions } from '../src/options.ts';

describe('parseBenchOptions', () => {
  it('takes the full defaults when nothing is set', () => {
    const options = parseBenchOptions({});
    expect(options).toMatchObject({
      postgresUrl: 'postgresql://postgres@127.0.0.1:5432',
      quick: false,
      runs: 5,
      p1Seconds: 3,
      p2Seconds: 5,
      p3Keys: 200,
      pgbenchSeconds: 4,
      curveRounds: 3,
      curveSeconds: 3,
      orderSeconds: 3,
      jobs: 200,
      verbose: false,
    });
    expect(options.peers).toMatchObject({ p1Seconds: 1, p2Seconds: 2, replayKeys: 100, twoInstances: true });
    expect(options.storage).toMatchObject({ p6Rows: 1_000_000, growthRows: [10_000, 1_000_000] });
    expect([...(options.storage?.sections ?? [])]).toEqual(['p6', 'growth']);
  });

  it('takes the short defaults in quick mode, for its own sections and for the peers and storage', () => {
    const options = parseBenchOptions({ BENCH_QUICK: '1' });
    expect(options).toMatchObject({
      quick: true,
      runs: 5,
      p1Seconds: 1,
      p2Seconds: 1,
      p3Keys: 40,
      pgbenchSeconds: 1,
      curveRounds: 1,
      curveSeconds: 1,
      orderSeconds: 1,
      jobs: 30,
    });
    expect(options.peers).toMatchObject({ p1Seconds: 1, p2Seconds: 1, replayKeys: 20, twoInstances: false });
    expect(options.storage).toMatchObject({
      p6Rows: 100_000,
      p6LiveRows: 20_000,
      p6BaselineSeconds: 2,
      scopes: 10_000,
      growthRows: [10_000],
      growthSamples: 200,
    });
    expect([...(options.storage?.sections ?? [])]).toEqual(['p6', 'growth']);
  });

  it('lets an explicit value win over the quick default, and never writes into the environment it reads', () => {
    const env = {
      BENCH_QUICK: '1',
      BENCH_P1_SECONDS: '4',
      BENCH_PEERS_P2_SECONDS: '3',
      BENCH_GROWTH_ROWS: '',
    };
    const options = parseBenchOptions(env);
    expect(options.p1Seconds).toBe(4);
    expect(options.peers?.p2Seconds).toBe(3);
    expect(options.storage?.growthRows).toEqual([10_000]);
    expect(env).toEqual({
      BENCH_QUICK: '1',
      BENCH_P1_SECONDS: '4',
      BENCH_PEERS_P2_SECONDS: '3',
      BENCH_GROWTH_ROWS: '',
    });
  });

  it('keeps at least 5 runs, and skips the peers and storage sections with BENCH_PEERS=0, BENCH_STORAGE=0', () => {
    const options = parseBenchOptions({ BENCH_RUNS: '2', BENCH_PEERS: '0', BENCH_STORAGE: '0' });
    expect(options.runs).toBe(5);
    expect(options.peers).toBeNull();
    expect(options.storage).toBeNull();
  });

  it('is frozen', () => {
    const options = parseBenchOptions({});
    expect(Object.isFrozen(options)).toBe(true);
    expect(Object.isFrozen(options.curveConnections)).toBe(true);
    expect(Object.isFrozen(options.peers)).toBe(true);
  });

  it('refuses a bad value by the name of its variable, also for a section that is skipped', () => {
    expect(() => parseBenchOptions({ BENCH_P1_SECONDS: 'three' })).toThrow(
      'BENCH_P1_SECONDS must be a non-negative integer',
    );
    expect(() => parseBenchOptions({ BENCH_JOBS: '-1' })).toThrow(
      'BENCH_JOBS must be a non-negative integer',
    );
    expect(() => parseBenchOptions({ BENCH_QUICK: 'yes' })).toThrow('BENCH_QUICK must be 1 or 0');
    expect(() => parseBenchOptions({ BENCH_PEERS: '0', BENCH_PEERS_REPLAY_KEYS: '1.5' })).toThrow(
      'BENCH_PEERS_REPLAY_KEYS must be a non-negative integer',
    );
    expect(() => parseBenchOptions({ BENCH_STORAGE_SECTIONS: 'p6,p9' })).toThrow(
      'BENCH_STORAGE_SECTIONS: unknown section p9',
    );
  });
});
