/**
 * The peers section of `pnpm bench` (issue #7 part 3): Idem and three idempotency libraries from npm, each
 * wrapping THE same handler (effect.ts) in a small server of its own process, measured in the same run,
 * interleaved, every figure the median of the per-round figures.
 *
 * Per round: P1 p50 latency at 1 connection and P2 throughput at 32 connections for every arm (protected and
 * unprotected routes, grouped so each protected arm runs next to its own baseline); replay p50 / first p50 on
 * primed keys; 50 same-key requests at once against one process and split over two processes of the same
 * server, counting `bench_effects` rows. After the rounds, once per variant: an identical retry and a retry
 * with the same key and a different payload.
 *
 * The caller provides a migrated database with `bench_effects`; Redis keys are written under KEY_PREFIX only and
 * deleted before and after.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { cycleThrough } from '../cannon.ts';
import { type CpuRoles, pidsWhere, startCpuWindow } from '../proc-cpu.ts';
import { benchRoot } from '../repository.ts';
import { median, rotate } from '../stats.ts';
import { KEY_PREFIX, MARKER_BASE, type PeerSettings } from './config.ts';
import {
  type ArmId,
  armGroups,
  armIds,
  arms,
  protectedArmIds,
  protectedServers,
  type VariantId,
  variantIds,
  variants,
} from './contenders.ts';
import { type Answer, burst, cannon, post } from './load.ts';
import { type ServerProcess, startServerProcess } from './processes.ts';
import { withRedis } from './redis-keys.ts';
import type { BurstOutcome, CpuPerRequest, PeersResult, Probe, ProbeAnswer, RoundResult } from './results.ts';
import { type ServerName, serverNames } from './server-names.ts';
import { summarizeArm, summarizeVariant } from './summarize.ts';

export interface PeersOptions {
  /** A migrated database that has `bench_effects`. */
  databaseUrl: string;
  settings: PeerSettings;
  log(line: string): void;
  verbose?: boolean;
}

const PEER_PACKAGES = [
  'express',
  'express-idempotency',
  '@node-idempotency/core',
  '@node-idempotency/storage-adapter-redis',
  '@aws-lambda-powertools/idempotency',
  '@redis/client',
];

function packageVersion(name: string): string {
  try {
    const file = path.join(benchRoot, 'node_modules', name, 'package.json');
    return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

const fmt = (value: number, digits = 2) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');

export async function runPeerBench(options: PeersOptions): Promise<PeersResult> {
  const { settings, log } = options;
  const started = Date.now();
  const client = new pg.Client({ connectionString: options.databaseUrl });
  await client.connect();
  const processes: ServerProcess[] = [];
  try {
    const postgres =
      (await client.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v ?? '?';
    const redis = await withRedis(settings.redisUrl, async (r) => {
      const stale = await r.deleteByPrefix(KEY_PREFIX);
      if (stale > 0) log(`deleted ${stale} stale ${KEY_PREFIX}* Redis keys`);
      return r.version();
    });

    const rows = async (n: number) =>
      (await client.query<{ c: number }>('select count(*)::int as c from bench_effects where n = $1', [n]))
        .rows[0]?.c ?? 0;

    // ---- servers: one process per contender, a second one of each protected server for the split bursts.
    const env = {
      DATABASE_URL: options.databaseUrl,
      BENCH_REDIS_URL: settings.redisUrl,
      BENCH_PEERS_POOL: String(settings.poolSize),
      BENCH_PEERS_KEY_PREFIX: KEY_PREFIX,
    };
    const verbose = options.verbose ?? false;
    log(
      `starting ${serverNames.length} server processes${settings.twoInstances ? ' (+ a second instance of each protected one)' : ''}`,
    );
    // Started in parallel; every one that did start is stopped in `finally`, even when another failed.
    const startAll = async (names: readonly ServerName[], instance: string) => {
      const outcomes = await Promise.allSettled(
        names.map((name) => startServerProcess(name, instance, env, verbose)),
      );
      for (const outcome of outcomes) if (outcome.status === 'fulfilled') processes.push(outcome.value);
      const failed = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failed) throw failed.reason;
      return outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
    };
    const primaryList = await startAll(serverNames, '1');
    const secondaryList = settings.twoInstances ? await startAll(protectedServers, '2') : [];
    const primary = Object.fromEntries(
      serverNames.map((name, i) => [name, primaryList[i]?.url ?? '']),
    ) as Record<ServerName, string>;
    const secondary = Object.fromEntries(
      protectedServers.map((name, i) => [name, secondaryList[i]?.url ?? '']),
    ) as Partial<Record<ServerName, string>>;
    // The processes whose CPU a throughput window counts: the arm's server, the database's backends, Redis.
    const database = new URL(options.databaseUrl).pathname.slice(1);
    const serverPid = (id: ArmId) => primaryList[serverNames.indexOf(arms[id].server)]?.pid ?? 0;
    const cpuRoles = (id: ArmId): CpuRoles<keyof CpuPerRequest> => ({
      server: () => [serverPid(id)],
      postgres: () => pidsWhere((title) => title.startsWith('postgres: ') && title.includes(` ${database} `)),
      redis: () => pidsWhere((commandLine) => commandLine.startsWith('redis-server')),
    });
    const armUrl = (id: ArmId) => `${primary[arms[id].server]}${arms[id].path}`;
    const variantUrls = (id: VariantId, instances: 1 | 2) => {
      const { server, path: route } = variants[id];
      const urls = [`${primary[server]}${route}`];
      const second = secondary[server];
      if (instances === 2 && second) urls.push(`${second}${route}`);
      return urls;
    };

    // ---- sanity: every route answers 200 to a fresh key.
    for (const id of variantIds) {
      for (const url of variantUrls(id, settings.twoInstances ? 2 : 1)) {
        const answer = await post(url, randomUUID(), 1);
        if (answer.status !== 200) throw new Error(`${url}: ${answer.status} ${answer.body.slice(0, 300)}`);
      }
    }
    for (const id of armIds) {
      const answer = await post(armUrl(id), randomUUID(), 1);
      if (answer.status !== 200)
        throw new Error(`${armUrl(id)}: ${answer.status} ${answer.body.slice(0, 300)}`);
    }

    log('warm-up: 1 s per arm at 8 connections, 40 requests per second instance');
    for (const id of armIds) await cannon(armUrl(id), { connections: 8, duration: 1 });
    for (const id of variantIds)
      for (const url of variantUrls(id, 2).slice(1)) await cannon(url, { connections: 4, amount: 40 });

    // ---- rounds.
    const rounds: RoundResult[] = [];
    for (let round = 0; round < settings.runs; round += 1) {
      log(`run ${round + 1}/${settings.runs}`);
      const result: RoundResult = {
        p1Ms: {} as Record<ArmId, number>,
        p2Rps: {} as Record<ArmId, number>,
        p2CpuMs: {},
        replay: {},
        bursts: {},
        failures: {},
      };
      const order = rotate(armGroups, round).map((group) => (round % 2 === 0 ? group : [...group].reverse()));
      const addFailures = (id: ArmId, count: number) => {
        result.failures[id] = (result.failures[id] ?? 0) + count;
      };

      for (const group of order) {
        const parts: string[] = [];
        for (const id of group) {
          const sample = await cannon(armUrl(id), { connections: 1, duration: settings.p1Seconds });
          result.p1Ms[id] = median(sample.latencies);
          addFailures(id, sample.failed);
          parts.push(`${id} ${fmt(result.p1Ms[id])} ms${sample.failed ? ` (${sample.failed} failed)` : ''}`);
        }
        log(`  P1 p50 @1: ${parts.join(' · ')}`);
      }
      for (const group of order) {
        const parts: string[] = [];
        for (const id of group) {
          const stopCpu = startCpuWindow(cpuRoles(id));
          const sample = await cannon(armUrl(id), {
            connections: settings.p2Connections,
            duration: settings.p2Seconds,
          });
          const cpu = stopCpu();
          result.p2Rps[id] = sample.ok / sample.seconds;
          const perRequest = (seconds: number) => (1000 * seconds) / Math.max(1, sample.ok);
          result.p2CpuMs[id] = {
            server: perRequest(cpu.server),
            postgres: perRequest(cpu.postgres),
            redis: perRequest(cpu.redis),
          };
          addFailures(id, sample.failed);
          parts.push(
            `${id} ${fmt(result.p2Rps[id], 0)} req/s${sample.failed ? ` (${sample.failed} failed)` : ''}`,
          );
        }
        log(`  P2 @${settings.p2Connections}: ${parts.join(' · ')}`);
      }

      const replayParts: string[] = [];
      for (const [index, id] of rotate(protectedArmIds, round).entries()) {
        const marker = MARKER_BASE + round * 1000 + index * 10;
        const keys = Array.from({ length: settings.replayKeys }, () => randomUUID());
        const eachKeyOnce = () =>
          cannon(armUrl(id), { connections: 1, amount: keys.length, n: marker, nextKey: cycleThrough(keys) });
        const first = await eachKeyOnce();
        const before = await rows(marker);
        const again = await eachKeyOnce();
        const rowsWritten = (await rows(marker)) - before;
        addFailures(id, first.failed + again.failed);
        result.replay[id] = {
          firstP50: median(first.latencies),
          replayP50: median(again.latencies),
          rowsWritten,
        };
        replayParts.push(
          `${id} ${fmt(median(again.latencies))}/${fmt(median(first.latencies))} ms` +
            `${rowsWritten ? ` (${rowsWritten} rows!)` : ''}${again.failed ? ` (${again.failed} failed)` : ''}`,
        );
      }
      log(`  replay/first p50: ${replayParts.join(' · ')}`);

      const burstParts: string[] = [];
      for (const [index, id] of rotate(variantIds, round).entries()) {
        const one = await measuredBurst(variantUrls(id, 1), MARKER_BASE + round * 1000 + 100 + index * 10);
        const two = settings.twoInstances
          ? await measuredBurst(variantUrls(id, 2), MARKER_BASE + round * 1000 + 101 + index * 10)
          : undefined;
        result.bursts[id] = { oneInstance: one, ...(two ? { twoInstances: two } : {}) };
        burstParts.push(`${id} ${one.executions}${two ? `/${two.executions}` : ''}`);
      }
      log(
        `  ${settings.burst} same-key at once, executions (1 process${settings.twoInstances ? '/2 processes' : ''}): ${burstParts.join(' · ')}`,
      );
      rounds.push(result);
    }

    async function measuredBurst(urls: string[], marker: number): Promise<BurstOutcome> {
      const outcome = await burst(urls, settings.burst, randomUUID(), marker);
      return { ...outcome, executions: await rows(marker) };
    }

    // ---- probes: identical retry and mismatched payload, once per variant.
    log('probes: identical retry and same key + different payload');
    const probes = {} as Record<VariantId, Probe>;
    for (const [index, id] of variantIds.entries()) {
      const [url] = variantUrls(id, 1);
      const key = randomUUID();
      const markerA = MARKER_BASE + 900_000 + index * 10;
      const markerB = markerA + 1;
      const first = await post(url ?? '', key, markerA);
      const retry = await post(url ?? '', key, markerA);
      const mismatch = await post(url ?? '', key, markerB);
      probes[id] = {
        first: clip(first),
        identicalRetry: {
          ...clip(retry),
          sameBodyAsFirst: retry.body === first.body,
          rowsWritten: (await rows(markerA)) - 1,
        },
        mismatchedPayload: {
          ...clip(mismatch),
          sameBodyAsFirst: mismatch.body === first.body,
          rowsWritten: await rows(markerB),
        },
      };
      log(
        `  ${id}: first ${first.status}; identical retry ${retry.status}${retry.body === first.body ? ' (same body)' : ''}; ` +
          `different payload ${mismatch.status}${mismatch.body === first.body ? ' (the FIRST result replayed)' : ''}, ` +
          `${probes[id].mismatchedPayload.rowsWritten} row(s) for it`,
      );
    }

    return {
      date: new Date().toISOString(),
      machine: {
        cpus: os.cpus().length,
        node: process.version,
        postgres,
        redis,
        platform: `${os.platform()} ${os.release()}`,
      },
      versions: Object.fromEntries(PEER_PACKAGES.map((name) => [name, packageVersion(name)])),
      settings,
      arms: armIds.map((id) => summarizeArm(id, rounds)),
      variants: variantIds.map((id) => summarizeVariant(id, rounds, probes[id])),
      rounds,
      seconds: Math.round((Date.now() - started) / 1000),
    };
  } finally {
    await Promise.all(processes.map((server) => server.stop()));
    await client.end();
    await withRedis(settings.redisUrl, (r) => r.deleteByPrefix(KEY_PREFIX)).catch(() => 0);
  }
}

function clip(answer: Answer): ProbeAnswer {
  return { status: answer.status, body: answer.body.slice(0, 300) };
}
