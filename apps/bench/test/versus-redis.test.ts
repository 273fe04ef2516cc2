/** Issue 32's table from the peers' rounds: per-round ratios, their medians and spreads, the targets judged on them. */
import { describe, expect, it } from 'vitest';
import { type ArmId, armIds } from '../src/peers/contenders.ts';
import type { PeersResult, RoundResult } from '../src/peers/results.ts';
import { versusRedis, versusRedisMarkdown } from '../src/peers/versus-redis.ts';

const perArm = (values: Partial<Record<ArmId, number>>): Record<ArmId, number> =>
  Object.fromEntries(armIds.map((id) => [id, values[id] ?? 1])) as Record<ArmId, number>;

/** A round where Idem serves `idemRps` against tRPC's 1000 and the best Redis peer `peerRps` against node:http's 1000. */
function round(idemRps: number, peerRps: number, replay: { idem: number; first: number }): RoundResult {
  return {
    p1Ms: perArm({ none: 1, trpc: 1.5, 'trpc-noop': 0.9, idem: 2, 'node-idempotency': 1.2, powertools: 1.3 }),
    p2Rps: perArm({
      none: 1000,
      trpc: 1000,
      'trpc-one-more-statement': 850,
      'idem-without-sql': 930,
      idem: idemRps,
      'node-idempotency': peerRps,
      powertools: peerRps - 100,
    }),
    p2CpuMs: {
      trpc: { server: 1, postgres: 0.5, redis: 0 },
      idem: { server: 1.25, postgres: 0.75, redis: 0 },
      'idem-without-sql': { server: 1.05, postgres: 0.5, redis: 0 },
      none: { server: 1, postgres: 0.5, redis: 0.01 },
      'node-idempotency': { server: 1.1, postgres: 0.5, redis: 0.04 },
    },
    replay: {
      idem: { firstP50: replay.first, replayP50: replay.idem, rowsWritten: 0 },
      'idem-replay-cache': { firstP50: replay.first, replayP50: replay.idem / 2, rowsWritten: 0 },
      'node-idempotency': { firstP50: 1.2, replayP50: 0.2, rowsWritten: 0 },
    },
    bursts: {},
    failures: {},
  };
}

function peersOf(rounds: RoundResult[]): PeersResult {
  return {
    date: '2026-12-04T12:00:00.000Z',
    machine: { cpus: 2, node: 'v26', postgres: '15', redis: '7', platform: 'linux' },
    versions: {},
    settings: {
      runs: rounds.length,
      p1Seconds: 1,
      p2Seconds: 2,
      p2Connections: 32,
      replayKeys: 100,
      burst: 50,
      twoInstances: true,
      poolSize: 10,
      redisUrl: 'redis://x',
    },
    arms: [],
    variants: [],
    rounds,
    seconds: 1,
  };
}

describe('versusRedis', () => {
  const peers = peersOf([
    round(900, 950, { idem: 1, first: 2 }), // Idem 0.90 vs 0.95: behind
    round(960, 940, { idem: 0.6, first: 2 }), // 0.96 vs 0.94: ahead
    round(800, 900, { idem: 0.4, first: 2 }), // 0.80 vs 0.90: behind
  ]);
  const table = versusRedis(peers);

  it('gives each contender the per-round ratio against its own framework, in round order', () => {
    const throughput = table.rows[0];
    expect(throughput?.runs.idem).toEqual([0.9, 0.96, 0.8]);
    expect(throughput?.runs['node-idempotency']).toEqual([0.95, 0.94, 0.9]);
    // CPU per request of the whole stack: Idem (1.25 + 0.75) ÷ tRPC (1 + 0.5); node-idempotency with Redis's share.
    expect(table.rows[1]?.runs.idem).toEqual([2 / 1.5, 2 / 1.5, 2 / 1.5]);
    expect(table.rows[1]?.runs['node-idempotency']?.[0]).toBeCloseTo(1.64 / 1.51);
    // An arm without CPU figures (an older results file) has no ratio, not a made-up one.
    expect(table.rows[1]?.runs.powertools).toEqual([Number.NaN, Number.NaN, Number.NaN]);
    expect(table.rows[2]?.runs.idem).toEqual([0.5, 0.3, 0.2]);
    expect(table.rows[3]?.runs.idem).toEqual([2 / 1.5, 2 / 1.5, 2 / 1.5]);
  });

  it("judges throughput on Idem's lead over the best Redis peer round by round", () => {
    const [throughput] = table.targets;
    expect(throughput?.runs.map((lead) => Number(lead.toFixed(2)))).toEqual([-0.05, 0.02, -0.1]);
    expect(throughput?.value).toBeCloseTo(-0.05);
    expect(throughput?.met).toBe(false);
    expect(throughput?.detail).toContain('Idem ahead in 1 of 3 rounds');
    // One more round trip in the unprotected route's transaction: 850 ÷ 1000.
    expect(throughput?.detail).toContain('Idem adds none): 0.85 (0.85–0.85, 3 runs)');
    // The middleware over a store that writes nothing: 930 ÷ 1000.
    expect(throughput?.detail).toContain('writes nothing): 0.93 (0.93–0.93, 3 runs)');
    // Idem's extra CPU per request against tRPC's, and its JavaScript alone's.
    expect(throughput?.detail).toContain('Idem server +0.25 ms, Postgres +0.25 ms');
    expect(throughput?.detail).toContain('alone: server +0.05 ms, Postgres +0.00 ms');
  });

  it("judges the replay target on Idem's median and shows the tRPC floor of the same rounds", () => {
    const [, replay, cached] = table.targets;
    expect(replay?.value).toBe(0.3);
    expect(replay?.met).toBe(false);
    // The no-op route's 0.9 ms ÷ Idem's 2 ms first execution.
    expect(replay?.detail).toContain('0.45 (0.45–0.45, 3 runs)');
    // With the replay cache (half the replay time in these rounds): 0.15, met.
    expect(cached?.value).toBe(0.15);
    expect(cached?.met).toBe(true);
    expect(versusRedis(peersOf([round(900, 950, { idem: 0.4, first: 2 })])).targets[1]?.met).toBe(true);
  });

  it('writes the before → now cells and one row per target', () => {
    const lines = versusRedisMarkdown(table, 'context').split('\n');
    expect(lines[4]).toContain('| 0.60 / 0.67 → **0.90** (0.80–0.96, 3 runs) |');
    expect(lines.filter((line) => line.includes('| **no** |'))).toHaveLength(2);
    expect(lines.filter((line) => line.includes('| yes |'))).toHaveLength(1);
  });
});
