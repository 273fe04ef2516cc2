/**
 * Several OS processes claim the same keys at the same moment on one MariaDB: each key's effect happens exactly
 * once, whatever process gets there first (the claim is InnoDB's unique-key check, shared by every connection
 * of every process). CONTROL: the same processes with a check-then-write claim run some keys more than once.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueScope } from './support/db.ts';
import { connectMariadbWithOwnTable, type MariadbWithOwnTable } from './support/mariadb.ts';

const PROCESSES = 4;
const KEYS = 40;
const WORKER = path.join(import.meta.dirname, 'support/mariadb-claim-worker.ts');
const REPO = path.resolve(import.meta.dirname, '../../..');

let mariadb: MariadbWithOwnTable;
beforeAll(async () => {
  mariadb = await connectMariadbWithOwnTable(2);
  await mariadb.scratch.execute([
    'CREATE TABLE effects (id INT AUTO_INCREMENT PRIMARY KEY, `key` VARCHAR(64) NOT NULL, pid INT NOT NULL)',
  ]);
});
afterAll(async () => {
  await mariadb?.dispose();
});

interface Summary {
  pid: number;
  executed: number;
  replayed: number;
  conflicts: number;
}

/** Starts a worker; `go()` releases it once every worker is ready; `done` is its summary. */
function startWorker(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
    cwd: REPO,
    env: { ...process.env, MARIADB_URL: mariadb.scratch.url, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let onReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    onReady = resolve;
  });
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
    if (stdout.includes('ready\n')) onReady();
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const done = new Promise<Summary>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      onReady();
      if (code !== 0) return reject(new Error(`worker exited ${code}: ${stderr}`));
      resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Summary);
    });
  });
  return { ready, go: () => child.stdin.end('go\n'), done };
}

async function race(mode: 'external' | 'transactional', claim?: 'check-then-write') {
  const scope = uniqueScope();
  const keys = Array.from({ length: KEYS }, () => randomUUID());
  const workers = Array.from({ length: PROCESSES }, () =>
    startWorker({ MODE: mode, KEYS: keys.join(','), SCOPE: scope, ...(claim ? { CLAIM: claim } : {}) }),
  );
  await Promise.all(workers.map((worker) => worker.ready));
  for (const worker of workers) worker.go();
  const summaries = await Promise.all(workers.map((worker) => worker.done));
  const rows = await mariadb.db.$queryRawUnsafe<Array<{ key: string; n: bigint; pids: bigint }>>(
    `SELECT \`key\`, COUNT(*) AS n, COUNT(DISTINCT pid) AS pids FROM effects WHERE \`key\` IN (${keys.map(() => '?').join(', ')}) GROUP BY \`key\``,
    ...keys,
  );
  const effects = new Map(rows.map((row) => [row.key, Number(row.n)]));
  return { keys, summaries, effects, scope };
}

describe.each(['external', 'transactional'] as const)('%s mode', (mode) => {
  it(`${PROCESSES} processes × ${KEYS} shared keys: every key's effect happens exactly once`, async () => {
    const { keys, summaries, effects, scope } = await race(mode);
    expect(new Set(summaries.map((summary) => summary.pid)).size).toBe(PROCESSES);
    expect(keys.map((key) => effects.get(key) ?? 0)).toEqual(keys.map(() => 1));
    const executed = summaries.reduce((sum, summary) => sum + summary.executed, 0);
    const replayed = summaries.reduce((sum, summary) => sum + summary.replayed, 0);
    expect(executed).toBe(KEYS);
    expect(replayed).toBe(KEYS * (PROCESSES - 1));
    const [row] = await mariadb.db.$queryRawUnsafe<Array<{ n: bigint }>>(
      "SELECT COUNT(*) AS n FROM idempotency_keys WHERE scope = ? AND state = 'completed'",
      scope,
    );
    expect(Number(row?.n)).toBe(KEYS);
    console.log(
      `[mariadb processes] ${mode}: ${PROCESSES} processes, ${KEYS} keys: ${executed} executions, ${replayed} replays, ` +
        `${summaries.reduce((sum, summary) => sum + summary.conflicts, 0)} 409s retried`,
    );
  }, 60_000);
});

describe('CONTROL: a check-then-write claim (find, then REPLACE) in the same processes', () => {
  it('runs some keys more than once', async () => {
    const { keys, effects } = await race('external', 'check-then-write');
    const doubled = keys.filter((key) => (effects.get(key) ?? 0) > 1);
    console.log(`[mariadb processes] control: ${doubled.length} of ${KEYS} keys ran more than once`);
    expect(doubled.length).toBeGreaterThan(0);
  }, 60_000);
});
