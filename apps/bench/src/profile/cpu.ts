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
import {
  createPrismaIdempotencyStore,
  idempotencyStatementName,
  type PrismaTransactionLike,
} from '@idem/idempotency/prisma';
import { createIdempotency } from '@idem/idempotency/trpc';
import { initTRPC } from '@trpc/server';
import pg from 'pg';
import { z } from 'zod';
import { intKnob } from '../knobs.ts';
import { insertEffect, runEffect } from '../peers/effect.ts';
import {
  createDatabase,
  dropDatabase,
  migrateDatabase,
  scratchDatabaseName,
  useExternalServer,
} from '../repository.ts';
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

interface BenchContext {
  headers: Headers;
}

async function main() {
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const name = scratchDatabaseName('idem_cpu');
  const databaseUrl = await createDatabase(server.adminUrl, name);
  const sql = new pg.Client({ connectionString: databaseUrl });
  // One connection each, so the server side is one backend and every statement runs on it.
  const prepared = createPrismaClient({
    connectionString: databaseUrl,
    max: 1,
    statementName: idempotencyStatementName,
  });
  const unnamed = createPrismaClient({ connectionString: databaseUrl, max: 1 });
  try {
    await migrateDatabase(databaseUrl);
    await sql.connect();
    await sql.query(
      'create table bench_effects (id bigserial primary key, n int, at timestamptz default now())',
    );
    const statements = await recordedStatements();
    const backend = Number(
      (await sql.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid ?? Number.NaN,
    );
    const insert = 'insert into bench_effects (n) values ($1) returning id, at';
    const idemTransaction = async (named: boolean) => {
      const key = randomUUID();
      const q = (label: string, text: string, values: unknown[]) =>
        sql.query(named ? { name: label, text, values } : { text, values });
      await sql.query('begin');
      await q('claim', statements.claim, statements.claimParams('instr', named ? 'named' : 'unnamed', key));
      await q('insert', insert, [1]);
      await q(
        'complete',
        statements.complete,
        statements.completeParams('instr', named ? 'named' : 'unnamed', key),
      );
      await sql.query('commit');
    };
    const rows: Array<[string, string, number]> = [];
    const add = (side: string, arm: string, count: number) => {
      rows.push([side, arm, count]);
      console.error(`[cpu] ${side}: ${arm}: ${(count * 1000).toFixed(0)} µs`);
    };

    add(
      'Postgres backend',
      'BEGIN, insert, COMMIT',
      await perRequest(backend, async () => {
        await sql.query('begin');
        await sql.query(insert, [1]);
        await sql.query('commit');
      }),
    );
    add(
      'Postgres backend',
      'BEGIN, claim, insert, complete, COMMIT — unnamed',
      await perRequest(backend, () => idemTransaction(false)),
    );
    add('Postgres backend', 'the same, prepared', await perRequest(backend, () => idemTransaction(true)));

    const routerOn = (db: Database) => {
      const t = initTRPC.context<BenchContext>().create();
      const idempotency = createIdempotency<BenchContext, PrismaTransactionLike<Database>>({
        store: createPrismaIdempotencyStore(db),
        getScope: () => 'instructions',
        getRequestHeaders: (ctx) => ctx.headers,
      });
      const input = z.object({ n: z.number().int() });
      return t.router({
        unprotected: t.procedure.input(input).mutation(({ input }) => runEffect(db, input.n)),
        protected: t.procedure
          .concat(idempotency.transactional())
          .input(input)
          .mutation(({ ctx, input }) => insertEffect(ctx.idempotency.tx, input.n)),
      }).createCaller;
    };
    const withKey = (key: string) => ({ headers: new Headers({ 'idempotency-key': key }) });
    const callPrepared = routerOn(prepared);
    const callUnnamed = routerOn(unnamed);
    const replayKey = randomUUID();
    await callPrepared(withKey(replayKey)).protected({ n: 1 });

    const self = process.pid;
    add(
      'this Node process',
      'pg: BEGIN, insert, COMMIT',
      await perRequest(self, async () => {
        await sql.query('begin');
        await sql.query(insert, [1]);
        await sql.query('commit');
      }),
    );
    add(
      'this Node process',
      'pg: BEGIN, claim, insert, complete, COMMIT (prepared)',
      await perRequest(self, () => idemTransaction(true)),
    );
    add(
      'this Node process',
      'Prisma: $transaction(insert)',
      await perRequest(self, () => runEffect(prepared, 1)),
    );
    add(
      'this Node process',
      'Prisma: $transaction(claim, insert, complete) (prepared)',
      await perRequest(self, () =>
        prepared.$transaction(async (tx) => {
          const key = randomUUID();
          await tx.$queryRawUnsafe(statements.claim, ...statements.claimParams('instr', 'prisma', key));
          await insertEffect(tx, 1);
          await tx.$executeRawUnsafe(
            statements.complete,
            ...statements.completeParams('instr', 'prisma', key),
          );
        }),
      ),
    );
    add(
      'this Node process',
      'tRPC: unprotected',
      await perRequest(self, () => callPrepared(withKey(randomUUID())).unprotected({ n: 1 })),
    );
    add(
      'this Node process',
      'tRPC: protected, first execution',
      await perRequest(self, () => callPrepared(withKey(randomUUID())).protected({ n: 1 })),
    );
    add(
      'this Node process',
      'tRPC: protected, first execution, unnamed statements',
      await perRequest(self, () => callUnnamed(withKey(randomUUID())).protected({ n: 1 })),
    );
    add(
      'this Node process',
      'tRPC: protected, replay',
      await perRequest(self, () => callPrepared(withKey(replayKey)).protected({ n: 1 })),
    );

    console.log(`CPU time per request (perf stat -e task-clock, N = ${N}):\n`);
    console.log('| measured process | request | CPU µs |');
    console.log('|---|---|---|');
    for (const [side, arm, count] of rows) console.log(`| ${side} | ${arm} | ${(count * 1000).toFixed(0)} |`);
  } finally {
    await sql.end().catch(() => {});
    await prepared.$disconnect();
    await unnamed.$disconnect();
    await dropDatabase(server.adminUrl, name);
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
