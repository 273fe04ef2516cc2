/**
 * `pnpm bench:load-profile` (issue 32, item 1): at 32 connections, where does a protected request wait — for a
 * pooled connection, on row locks, on the WAL's fsync, on the event loop, in Prisma's transaction start?
 *
 * Starts `pnpm bench`'s stack (stack.ts: a scratch database, the app's test server) with a probe inside the
 * server process (load-probe.ts: the pg pool's checkouts, waits and holds, its waiting count, the event loop's
 * delay and utilization), then drives `bench.protected` and `bench.unprotected` (P2's load generator,
 * requests.ts) at BENCH_LOAD_CONNECTIONS for BENCH_LOAD_SECONDS each, BENCH_LOAD_ROUNDS rounds, the order
 * alternating. Meanwhile it samples `pg_stat_activity` every BENCH_LOAD_SAMPLE_MS on a connection of its own —
 * the server's backends only (their `application_name`) — and counts the CPU time of the server process, of its
 * Postgres backends and of this process (/proc; Postgres on this machine). Prints the budget (load-budget.ts) and
 * writes it with every round's figures to docs/load-profile-results.json.
 *
 * Knobs: BENCH_LOAD_SECONDS (10), BENCH_LOAD_ROUNDS (3), BENCH_LOAD_CONNECTIONS (32), BENCH_LOAD_SAMPLE_MS (20),
 * BENCH_LOAD_ARMS (protected,unprotected; `noop` is the route with no database work of its own), DATABASE_URL;
 * BENCH_LOAD_POOL_MAX (unset: the app's own pool size, 10) resizes the server's pools, for an experiment;
 * BENCH_LOAD_RESULTS (docs/load-profile-results.json) is where the results go; BENCH_LOAD_CPU_PROF=<dir> writes a
 * CPU profile of the server for every arm and round, its timed window only, to <dir>/<arm>-<round>.cpuprofile
 * (compare two with `bench:cpuprofile <a> --against <b> --per <requests>`; the profiler costs throughput).
 * Needs `pnpm build` first (the test server runs from apps/web's build), like `pnpm bench`.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { intKnob, listKnob, stringKnob } from '../knobs.ts';
import { log } from '../log.ts';
import { parseBenchOptions } from '../options.ts';
import { cpuSeconds } from '../proc-cpu.ts';
import { messageOf, repoRoot } from '../repository.ts';
import { cannon, type Procedure } from '../requests.ts';
import { startStack, stopOnSignals } from '../stack.ts';
import { median } from '../stats.ts';
import { Teardown } from '../teardown.ts';
import {
  type ActivityRow,
  type ArmRound,
  budgetMarkdown,
  mainPool,
  statementOf,
  stateOf,
} from './load-budget.ts';
import type { ProbeAnswer, ProbeRequest, ProbeWindow } from './load-probe.ts';

const env = process.env;
const SECONDS = intKnob(env, 'BENCH_LOAD_SECONDS', 10);
const ROUNDS = Math.max(1, intKnob(env, 'BENCH_LOAD_ROUNDS', 3));
const CONNECTIONS = intKnob(env, 'BENCH_LOAD_CONNECTIONS', 32);
const SAMPLE_MS = Math.max(1, intKnob(env, 'BENCH_LOAD_SAMPLE_MS', 20));
const ARMS = listKnob(env, 'BENCH_LOAD_ARMS', ['protected', 'unprotected']).map((arm) => {
  if (arm !== 'protected' && arm !== 'unprotected' && arm !== 'noop')
    throw new Error('BENCH_LOAD_ARMS: protected, unprotected, noop');
  return arm satisfies Procedure;
});
const APPLICATION_NAME = 'idem-bench-load-web';
const PROBE = fileURLToPath(new URL('./load-probe.ts', import.meta.url));
const RESULTS = path.resolve(
  repoRoot,
  stringKnob(env, 'BENCH_LOAD_RESULTS', 'docs/load-profile-results.json'),
);
/** The probe resizes the server's pools to this (load-probe.ts); null: the app's own size. */
const POOL_MAX = intKnob(env, 'BENCH_LOAD_POOL_MAX', 0) || null;
const CPU_PROF = stringKnob(env, 'BENCH_LOAD_CPU_PROF', '');

/** A thread's time on a core and waiting for one (runnable), seconds, from /proc/<pid>/schedstat. */
function schedstat(pid: number): { onCpu: number; waiting: number } | null {
  try {
    const [onCpu, waiting] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(' ').map(Number);
    return { onCpu: (onCpu ?? Number.NaN) / 1e9, waiting: (waiting ?? Number.NaN) / 1e9 };
  } catch {
    return null;
  }
}

/** The machine's CPU ticks: busy (all but idle and iowait) and total, from /proc/stat. */
function machineTicks(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const values = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = values.reduce((sum, n) => sum + n, 0);
  return { busy: total - (values[3] ?? 0) - (values[4] ?? 0), total };
}

/** Samples `pg_stat_activity` for the app's backends until stopped. */
function startSampler(client: pg.Client) {
  const states: Record<string, number> = {};
  const idleInTransactionAfter: Record<string, number> = {};
  const activeIn: Record<string, number> = {};
  const pids = new Set<number>();
  let samples = 0;
  let running = true;
  const started = performance.now();
  const bump = (counts: Record<string, number>, key: string) => {
    counts[key] = (counts[key] ?? 0) + 1;
  };
  const loop = (async () => {
    while (running) {
      const at = performance.now();
      const { rows } = await client.query<ActivityRow>(
        `select pid, state, wait_event_type, wait_event, query from pg_stat_activity
          where application_name = $1 and backend_type = 'client backend'`,
        [APPLICATION_NAME],
      );
      samples += 1;
      for (const row of rows) {
        pids.add(row.pid);
        bump(states, stateOf(row));
        if (row.state === 'idle in transaction') bump(idleInTransactionAfter, statementOf(row.query));
        if (row.state === 'active') bump(activeIn, statementOf(row.query));
      }
      const left = SAMPLE_MS - (performance.now() - at);
      if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
    }
  })();
  return async () => {
    running = false;
    await loop;
    const ms = performance.now() - started;
    return {
      states,
      idleInTransactionAfter,
      activeIn,
      samples,
      sampleIntervalMs: ms / Math.max(1, samples),
      pids,
    };
  };
}

const tellProbe = (child: ChildProcess, request: ProbeRequest) => child.send(request);

/** The server probe's window so far (load-probe.ts), or null when it does not answer within 15 s. */
function readProbe(child: ChildProcess): Promise<ProbeWindow | null> {
  return new Promise((resolve) => {
    const onMessage = (message: ProbeAnswer) => {
      if (message?.probe !== 'window') return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(message.window);
    };
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      resolve(null);
    }, 15_000);
    child.on('message', onMessage);
    tellProbe(child, { probe: 'read' });
  });
}

async function backendPids(client: pg.Client): Promise<number[]> {
  const { rows } = await client.query<{ pid: number }>(
    "select pid from pg_stat_activity where application_name = $1 and backend_type = 'client backend'",
    [APPLICATION_NAME],
  );
  return rows.map((row) => row.pid);
}

async function main(teardown: Teardown): Promise<void> {
  const options = parseBenchOptions({ ...env, BENCH_PEERS: '0', BENCH_STORAGE: '0' });
  const loadAtStart = os.loadavg()[0] ?? Number.NaN;
  const stack = await startStack(options, teardown, {
    nodeArgs: ['--import', PROBE],
    ipc: true,
    applicationName: APPLICATION_NAME,
  });
  const server = stack.webProcess;
  const serverPid = server.pid ?? 0;
  const sampler = new pg.Client({
    connectionString: stack.databaseUrl,
    application_name: 'idem-bench-load-sampler',
  });
  await sampler.connect();
  teardown.add(() => sampler.end());
  log(
    `load profile: ${ARMS.join(', ')} at ${CONNECTIONS} connections, ${SECONDS} s each, ${ROUNDS} rounds; ` +
      `pg_stat_activity every ${SAMPLE_MS} ms (load average ${loadAtStart.toFixed(2)})`,
  );
  log('warm-up: 2 s per arm');
  for (const arm of ARMS) await cannon(stack.url, arm, { connections: CONNECTIONS, duration: 2 });

  const arms: Record<string, ArmRound[]> = Object.fromEntries(ARMS.map((arm) => [arm, []]));
  for (let round = 0; round < ROUNDS; round += 1) {
    // ABAB…, as `pnpm bench` (requests.ts `alternate`): neither arm always on the warmer machine.
    for (const arm of round % 2 === 0 ? ARMS : [...ARMS].reverse()) {
      const backends = await backendPids(stack.client);
      const backendStart = new Map(backends.map((pid) => [pid, cpuSeconds(pid) ?? 0]));
      const backendQueueStart = new Map(backends.map((pid) => [pid, schedstat(pid)?.waiting ?? 0]));
      const serverStart = cpuSeconds(serverPid) ?? Number.NaN;
      const serverQueueStart = schedstat(serverPid)?.waiting ?? Number.NaN;
      const selfStart = process.cpuUsage();
      const machineStart = machineTicks();
      const wallStart = performance.now();
      tellProbe(server, {
        probe: 'reset',
        ...(CPU_PROF ? { profile: path.resolve(CPU_PROF, `${arm}-${round + 1}.cpuprofile`) } : {}),
      });
      const stop = startSampler(sampler);
      const sample = await cannon(stack.url, arm, { connections: CONNECTIONS, duration: SECONDS });
      const activity = await stop();
      const probe = await readProbe(server);
      const wallSeconds = (performance.now() - wallStart) / 1000;
      const self = process.cpuUsage(selfStart);
      const machineEnd = machineTicks();
      let backendSeconds = 0;
      let backendQueueSeconds = 0;
      for (const pid of new Set([...backends, ...activity.pids])) {
        const now = cpuSeconds(pid);
        if (now !== null) backendSeconds += now - (backendStart.get(pid) ?? 0);
        const queued = schedstat(pid)?.waiting;
        if (queued !== undefined) backendQueueSeconds += queued - (backendQueueStart.get(pid) ?? 0);
      }
      const latencies = [...sample.latencies].sort((a, b) => a - b);
      const result: ArmRound = {
        round: round + 1,
        requests: sample.ok,
        failed: sample.failed,
        seconds: sample.seconds,
        rps: sample.ok / sample.seconds,
        latencyP50Ms: median(latencies),
        latencyP99Ms: latencies[Math.floor(0.99 * latencies.length)] ?? Number.NaN,
        latencyMeanMs: latencies.reduce((sum, n) => sum + n, 0) / Math.max(1, latencies.length),
        samples: activity.samples,
        sampleIntervalMs: activity.sampleIntervalMs,
        states: activity.states,
        idleInTransactionAfter: activity.idleInTransactionAfter,
        activeIn: activity.activeIn,
        probe,
        cpu: {
          server: (100 * ((cpuSeconds(serverPid) ?? Number.NaN) - serverStart)) / wallSeconds,
          backends: (100 * backendSeconds) / wallSeconds,
          loadGenerator: (100 * (self.user + self.system)) / 1e6 / wallSeconds,
          serverRunQueue:
            (100 * ((schedstat(serverPid)?.waiting ?? Number.NaN) - serverQueueStart)) / wallSeconds,
          backendsRunQueue: (100 * backendQueueSeconds) / wallSeconds,
          machineBusyPercent:
            (100 * (machineEnd.busy - machineStart.busy)) /
            Math.max(1, machineEnd.total - machineStart.total),
        },
        loadAverage: os.loadavg()[0] ?? Number.NaN,
      };
      arms[arm]?.push(result);
      const pool = mainPool(result);
      log(
        `  round ${round + 1} ${arm.padEnd(11)} ${result.rps.toFixed(0)} req/s, p50 ${result.latencyP50Ms.toFixed(1)} ms, ` +
          `pool waiting ${pool ? pool.meanWaiting.toFixed(1) : '?'}, event loop ${probe ? (100 * probe.eventLoop.utilization).toFixed(0) : '?'} % busy, ` +
          `server CPU ${result.cpu.server.toFixed(0)} %, ${activity.samples} samples (load ${result.loadAverage.toFixed(2)}; ${sample.failed} failed)`,
      );
    }
  }

  const loadAtEnd = os.loadavg()[0] ?? Number.NaN;
  const markdown = budgetMarkdown({ arms, connections: CONNECTIONS });
  const date = new Date().toISOString();
  const context =
    `Measured ${date.slice(0, 16).replace('T', ' ')} UTC by \`pnpm bench:load-profile\` (${os.cpus().length} cores, Node ${process.version}, ` +
    `PostgreSQL ${stack.postgresVersion}; ${ROUNDS} rounds × ${SECONDS} s per arm at ${CONNECTIONS} connections, the order alternating${POOL_MAX ? `; EXPERIMENT: the server's pool resized to ${POOL_MAX}` : ''}; ` +
    `load average ${loadAtStart.toFixed(1)} at the start, ${loadAtEnd.toFixed(1)} at the end; each cell the median over the rounds (min–max)).`;
  console.log(`\n${context}\n\n${markdown}\n`);
  writeFileSync(
    RESULTS,
    `${JSON.stringify(
      {
        date,
        command: 'pnpm build && pnpm bench:load-profile',
        machine: {
          cpus: os.cpus().length,
          node: process.version,
          postgres: stack.postgresVersion,
          loadAverage: { start: loadAtStart, end: loadAtEnd },
        },
        settings: {
          seconds: SECONDS,
          rounds: ROUNDS,
          connections: CONNECTIONS,
          sampleMs: SAMPLE_MS,
          arms: ARMS,
          poolMax: POOL_MAX,
          cpuProf: CPU_PROF || null,
        },
        arms,
        markdown,
      },
      null,
      2,
    )}\n`,
  );
  log(`wrote ${path.relative(repoRoot, RESULTS)}`);
}

const teardown = new Teardown('[bench:load-profile] cleanup');
stopOnSignals(teardown);
main(teardown)
  .catch((error) => {
    console.error(`[bench:load-profile] ${messageOf(error)}`);
    process.exitCode = 1;
  })
  .finally(() => teardown.run());
