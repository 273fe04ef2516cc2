/**
 * `pnpm bench:cpu`: steadier numbers for a shared, noisy machine — CPU time (`perf stat -e task-clock`: the
 * time the process was on a CPU) per request, instead of latency. (Hardware instruction counters are not
 * available in this machine's VM; task-clock is the software counter that is.) Server side: the Postgres backend of one connection while it runs
 * N transactions of each kind (unprotected, Idem's statements unnamed, Idem's statements prepared). Client side:
 * this Node process while it sends N requests of each kind through pg, Prisma and the tRPC middleware. CPU time
 * excludes waiting on the disk (commit fsync) and on the run queue, the two things that move latencies 2–5× under
 * load; it still moves with cache and frequency effects of the neighbours, so compare rows of one run. Needs `perf` and permission to attach to processes (root, or perf_event_paranoid ≤ 1).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createPrismaClient, type Database } from '@idem/db';
import { createPrismaIdempotencyStore, idempotencyStatementName } from '@idem/idempotency/prisma';
import { intKnob } from '../knobs.ts';
import { runEffect } from '../peers/effect.ts';
import { benchCaller, withKey } from './bench-caller.ts';
import { idemTransaction, insertTransaction, prismaIdemTransaction } from './hand-transactions.ts';
import { createProfileDatabase } from './profile-database.ts';
import { recordedStatements } from './recorded-statements.ts';

const N = intKnob(process.env, 'BENCH_CPU_N', 2000);

/** CPU milliseconds `pid` spends until the returned stop() (perf prints its counters on SIGINT). */
function countInstructions(pid: number): () => Promise<number> {
  const perf: ChildProcess = spawn('perf', ['stat', '-x', ',', '-e', 'task-clock', '-p', String(pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  perf.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => perf.once('exit', () => resolve()));
  return async () => {
    perf.kill('SIGINT');
    await exited;
    const line = stderr.split('\n').find((text) => text.includes('task-clock'));
    const count = Number(line?.split(',')[0]);
    if (!Number.isFinite(count)) throw new Error(`perf stat: ${stderr.trim() || 'no output'}`);
    return count;
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

async function perRequest(pid: number, run: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 200; i += 1) await run(); // JIT, plan caches, the pool
  const stop = countInstructions(pid);
  await settle();
  for (let i = 0; i < N; i += 1) await run();
  return (await stop()) / N;
}

/** Kinds of request, each by its label and one request of it. */
type Arms = Array<[arm: string, run: () => Promise<unknown>]>;

async function main() {
  const { url: databaseUrl, sql, drop } = await createProfileDatabase('idem_cpu');
  // One connection each, so the server side is one backend and every statement runs on it.
  const prepared = createPrismaClient({
    connectionString: databaseUrl,
    max: 1,
    statementName: idempotencyStatementName,
  });
  const unnamed = createPrismaClient({ connectionString: databaseUrl, max: 1 });
  try {
    const statements = await recordedStatements();
    const backend = Number(
      (await sql.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid ?? Number.NaN,
    );
    const idem = (named: boolean) =>
      idemTransaction(sql, statements, { scope: 'instr', procedure: named ? 'named' : 'unnamed' }, named);
    const rows: Array<[string, string, number]> = [];
    /** Each arm's CPU time per request in the process `pid`, a row each (`side` names the process). */
    const measure = async (side: string, pid: number, arms: Arms) => {
      for (const [arm, run] of arms) {
        const count = await perRequest(pid, run);
        rows.push([side, arm, count]);
        console.error(`[cpu] ${side}: ${arm}: ${(count * 1000).toFixed(0)} µs`);
      }
    };

    await measure('Postgres backend', backend, [
      ['BEGIN, insert, COMMIT', () => insertTransaction(sql)],
      ['BEGIN, claim, insert, complete, COMMIT — unnamed', () => idem(false)],
      ['the same, prepared', () => idem(true)],
    ]);

    const callerOn = (db: Database) =>
      benchCaller(db, { store: createPrismaIdempotencyStore(db), getScope: () => 'instructions' });
    const callPrepared = callerOn(prepared);
    const callUnnamed = callerOn(unnamed);
    const replayKey = randomUUID();
    await callPrepared(withKey(replayKey)).protected({ n: 1 });

    await measure('this Node process', process.pid, [
      ['pg: BEGIN, insert, COMMIT', () => insertTransaction(sql)],
      ['pg: BEGIN, claim, insert, complete, COMMIT (prepared)', () => idem(true)],
      ['Prisma: $transaction(insert)', () => runEffect(prepared, 1)],
      [
        'Prisma: $transaction(claim, insert, complete) (prepared)',
        () => prismaIdemTransaction(prepared, statements, { scope: 'instr', procedure: 'prisma' }),
      ],
      ['tRPC: unprotected', () => callPrepared(withKey(randomUUID())).unprotected({ n: 1 })],
      ['tRPC: protected, first execution', () => callPrepared(withKey(randomUUID())).protected({ n: 1 })],
      [
        'tRPC: protected, first execution, unnamed statements',
        () => callUnnamed(withKey(randomUUID())).protected({ n: 1 }),
      ],
      ['tRPC: protected, replay', () => callPrepared(withKey(replayKey)).protected({ n: 1 })],
    ]);

    console.log(`CPU time per request (perf stat -e task-clock, N = ${N}):\n`);
    console.log('| measured process | request | CPU µs |');
    console.log('|---|---|---|');
    for (const [side, arm, count] of rows) console.log(`| ${side} | ${arm} | ${(count * 1000).toFixed(0)} |`);
  } finally {
    await prepared.$disconnect();
    await unnamed.$disconnect();
    await drop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
