/**
 * Several OS processes on ONE SQLite file (WAL and rollback journal): each sends the same keys at the same
 * moment through the handler; every key's effect runs exactly once. CONTROL: the same processes without the
 * claim run each key once per process.
 *
 * And SQLite's deferred-transaction trap, with two processes: a transaction that READS first and then writes
 * cannot upgrade once another process committed a write in between — SQLITE_BUSY (SQLITE_BUSY_SNAPSHOT in WAL)
 * at once, whatever busy_timeout says. The store's transactions write first (the claim's INSERT), so they wait
 * for the other writer instead (busy_timeout) and go on.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createSqlitePrismaClient } from '@idem/db-sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { fingerprintRequest } from '../src/index.ts';
import { createSqliteIdempotencyStore } from '../src/sqlite/index.ts';
import { uniqueScope } from './support/db.ts';
import { createSqliteKeyTable, scratchSqliteFile } from './support/sqlite-db.ts';

const WORKER = fileURLToPath(new URL('./support/sqlite-worker.ts', import.meta.url));
const PROCESSES = 4;
const KEYS = 25;
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

function worker(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const nextLine = (expected?: string) =>
    new Promise<string>((resolve, reject) => {
      const onLine = (line: string) => {
        if (expected && line !== expected) return;
        lines.off('line', onLine);
        resolve(line);
      };
      lines.on('line', onLine);
      child.once('exit', (code) =>
        reject(new Error(`worker exited (${code}) before "${expected ?? 'a line'}": ${stderr}`)),
      );
    });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, nextLine, exited, stderr: () => stderr };
}

async function databaseWithEffects(wal: boolean) {
  const file = scratchSqliteFile();
  await createSqliteKeyTable(file, { wal });
  const db = createSqlitePrismaClient({ file });
  await db.$executeRawUnsafe(
    'create table effects (scope text not null, key text not null, pid integer not null)',
  );
  return { file, db };
}

interface Summary {
  pid: number;
  executed: number;
  replayed: number;
  conflicts: number;
  errors: string[];
}

async function race(file: string, mode: string, scope: string, keys: string[]): Promise<Summary[]> {
  const startAt = Date.now() + 2_500; // every process has loaded by then
  const workers = Array.from({ length: PROCESSES }, () =>
    worker(['requests', file, mode, scope, keys.join(','), String(startAt)]),
  );
  return Promise.all(
    workers.map(async (w) => {
      const line = await w.nextLine();
      await w.exited;
      return JSON.parse(line) as Summary;
    }),
  );
}

async function effectsPerKey(db: ReturnType<typeof createSqlitePrismaClient>, scope: string) {
  const rows = await db.$queryRawUnsafe<Array<{ key: string; n: bigint | number; pids: bigint | number }>>(
    'select key, count(*) as n, count(distinct pid) as pids from effects where scope = ? group by key',
    scope,
  );
  return rows.map((row) => ({ key: row.key, n: Number(row.n), pids: Number(row.pids) }));
}

describe.each([
  { journal: 'WAL', wal: true },
  { journal: 'rollback journal', wal: false },
])('$journal: 4 processes, 25 keys, all at once', ({ wal }) => {
  it.each(['external', 'transactional'])(
    '%s mode: every key runs exactly once',
    async (mode) => {
      const { file, db } = await databaseWithEffects(wal);
      try {
        const scope = uniqueScope();
        const keys = Array.from({ length: KEYS }, () => randomUUID());
        const summaries = await race(file, mode, scope, keys);
        expect(summaries.flatMap((summary) => summary.errors)).toEqual([]);
        const perKey = await effectsPerKey(db, scope);
        expect(perKey).toHaveLength(KEYS);
        expect(perKey.every((row) => row.n === 1)).toBe(true);
        const executed = summaries.reduce((sum, summary) => sum + summary.executed, 0);
        const replayed = summaries.reduce((sum, summary) => sum + summary.replayed, 0);
        expect(executed).toBe(KEYS);
        // Every process sent every key: the other three got the stored response.
        expect(replayed).toBe(KEYS * (PROCESSES - 1));
      } finally {
        await db.$disconnect();
      }
    },
    60_000,
  );

  it('CONTROL, no claim: every key runs once per process', async () => {
    const { file, db } = await databaseWithEffects(wal);
    try {
      const scope = uniqueScope();
      const keys = Array.from({ length: KEYS }, () => randomUUID());
      await race(file, 'unprotected', scope, keys);
      const perKey = await effectsPerKey(db, scope);
      expect(perKey).toHaveLength(KEYS);
      expect(perKey.every((row) => row.n === PROCESSES && row.pids === PROCESSES)).toBe(true);
    } finally {
      await db.$disconnect();
    }
  }, 60_000);
});

describe('deferred transactions across two processes', () => {
  it('the database is in WAL mode when asked (the recommended journal)', async () => {
    const { db } = await databaseWithEffects(true);
    try {
      const [row] = await db.$queryRawUnsafe<Array<{ journal_mode: string }>>('pragma journal_mode');
      expect(row?.journal_mode).toBe('wal');
    } finally {
      await db.$disconnect();
    }
  });

  it("the store's claim-first transaction waits for the other process's writer and claims (busy_timeout)", async () => {
    const { file, db } = await databaseWithEffects(true);
    const store = createSqliteIdempotencyStore(db);
    try {
      const holder = worker(['hold-write-lock', file, '500']);
      await holder.nextLine('locked');
      const request = {
        scope: uniqueScope(),
        procedure: 'orders.place',
        key: randomUUID(),
        fingerprint: fingerprintRequest('orders.place', {}),
        owner: randomUUID(),
        leaseSeconds: 30,
        retentionSeconds: 60,
      };
      // Blocks (busy_timeout 5 s) until the holder commits at 500 ms, then inserts.
      const claimed = await store.transaction((tx) => store.claim(request, tx), {
        lockTimeoutMs: 5_000,
        timeoutMs: 10_000,
      });
      expect(claimed).toEqual({ claimed: true, takeover: false });
      expect(await holder.exited).toBe(0);
    } finally {
      await db.$disconnect();
    }
  }, 30_000);

  it('CONTROL: a transaction that reads first, then writes after the other process committed, fails with SQLITE_BUSY at once', async () => {
    const { file, db } = await databaseWithEffects(true);
    const store = createSqliteIdempotencyStore(db);
    try {
      const holder = worker(['hold-write-lock', file, '300']);
      await holder.nextLine('locked');
      const outcome = await db
        .$transaction(
          async (tx) => {
            // The read pins this transaction's snapshot (WAL readers never wait).
            await tx.$queryRawUnsafe('select count(*) as n from idempotency_keys');
            await holder.nextLine('committed');
            // Upgrading a snapshot older than the last commit cannot succeed by waiting.
            await tx.$executeRawUnsafe(`insert into effects (scope, key, pid) values ('reader', 'x', 0)`);
          },
          { timeout: 20_000 },
        )
        .then(
          () => null,
          (error: unknown) => error,
        );
      expect(outcome).not.toBeNull();
      expect(JSON.stringify(outcome, Object.getOwnPropertyNames(outcome ?? {}))).toMatch(/SQLITE_BUSY/);
      // It is the lock-timeout family, so the handler answers it with 409 (retry), not 500.
      expect(store.isLockTimeout(outcome)).toBe(true);
    } finally {
      await db.$disconnect();
    }
  }, 30_000);
});
