/**
 * `pnpm start`'s whole stack through a Postgres crash (issue 27, item 3): the stack runner (`scripts/stack.ts
 * start`: embedded Postgres, payment provider, worker, next start) with 20 retrying clients, while the embedded
 * database is restarted with `pg_ctl restart -m immediate` (a crash: every connection cut mid-transaction).
 * The runner stops the stack when any process exits on its own, so a stack still serving at the end means every
 * process survived; then each answered checkout, and one placed after the restart, must reach `shipped`, which
 * needs the provider (charge, webhook), the web app (webhook → job) and the worker (job → shipment) all working
 * again on their own. The provider's unit-level control (a lost connection on a lent client kills a process that
 * does not listen for it) is apps/provider/test/connection-lost.test.ts.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createPrismaClient, type Database } from '@idem/db';
import { repoRoot } from '@idem/dev-db/migrate';
import { EMBEDDED_PASSWORD, EMBEDDED_USER } from '@idem/dev-db/postgres';
import { demoUsers } from '@idem/dev-db/seed-data';
import { afterAll, beforeAll, expect, it, onTestFailed } from 'vitest';
import { freePort } from '../setup/free-port.ts';
import { orderIdOf } from './harness/invariants.ts';
import { type Attempt, isDefinite, runClient } from './harness/load.ts';
import { pgCtl } from './harness/pg-ctl.ts';

const CLIENTS = 20;
const tokens = demoUsers.filter((user) => user.role !== 'admin').map((user) => user.token);

let dataDir: string;
let stack: ChildProcess;
let stackExited: Promise<number | null>;
const output: string[] = [];
const lines: Array<(line: string) => void> = [];
let webUrl: string;
let db: Database;

const pgdata = () => path.join(dataDir, 'postgres');

/** Resolves with the first output line that matches, rejects if the stack exits first. */
function lineMatching(pattern: RegExp, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const seen = output.find((line) => pattern.test(line));
    if (seen) return resolve(seen);
    const timer = setTimeout(() => reject(new Error(`no ${pattern} within ${timeoutMs} ms`)), timeoutMs);
    const onLine = (line: string) => {
      if (!pattern.test(line)) return;
      clearTimeout(timer);
      resolve(line);
    };
    lines.push(onLine);
    void stackExited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the stack exited (${code}):\n${output.slice(-40).join('\n')}`));
    });
  });
}
beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'idem-stack-restart-'));
  const [webPort, providerPort, pgPort] = [await freePort(), await freePort(), await freePort()];
  // The runner's own environment, as a shell would give it: no test database, no test-only switches.
  const { DATABASE_URL: _database, NODE_ENV: _node, ...inherited } = process.env;
  stack = spawn(process.execPath, ['--import', 'tsx', 'scripts/stack.ts', 'start'], {
    cwd: repoRoot,
    env: {
      ...inherited,
      IDEM_DATA_DIR: dataDir,
      PORT: String(webPort),
      PROVIDER_PORT: String(providerPort),
      EMBEDDED_PG_PORT: String(pgPort),
      // 20 clients over two demo users at 127.0.0.1: past the production limits on new and pending orders.
      IDEM_NEW_ORDERS_PER_PRINCIPAL: '1000',
      IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS: '1000',
      IDEM_PENDING_ORDERS_PER_PRINCIPAL: '1000',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stackExited = new Promise((resolve) => stack.once('exit', (code) => resolve(code)));
  for (const stream of [stack.stdout, stack.stderr]) {
    if (stream)
      createInterface({ input: stream }).on('line', (line) => {
        output.push(line);
        for (const listener of lines) listener(line);
      });
  }
  await lineMatching(/checkout ready at/, 150_000);
  webUrl = `http://127.0.0.1:${webPort}`;
  db = createPrismaClient({
    connectionString: `postgresql://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${pgPort}/idem`,
    max: 2,
  });
}, 180_000);

afterAll(async () => {
  await db?.$disconnect();
  if (stack && stack.exitCode === null) {
    stack.kill('SIGTERM');
    await stackExited;
  }
  // From the restart on, pg_ctl owns the postmaster: the runner's stop signals the one it started, now gone.
  if (dataDir) await pgCtl(pgdata(), ['stop', '-m', 'fast', '-w']).catch(() => {});
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

const checkout = (index: number) => ({
  urls: () => [webUrl],
  token: tokens[index % tokens.length] ?? '',
  intent: `restart-${index}`,
  input: {
    items: [{ sku: index % 2 === 0 ? 'NB-DOT-A5' : 'MUG-STONE', quantity: 1 }],
    email: 'alice@example.com',
    cardToken: 'tok_visa',
  },
  maxAttempts: 60,
  deadlineMs: 120_000,
});

async function statusesOf(ids: string[]): Promise<string[]> {
  const orders = await db.order.findMany({ where: { id: { in: ids } }, select: { status: true } });
  return orders.map((order) => order.status);
}

it('every process lives through `pg_ctl restart -m immediate` under 20 retrying clients, and every order ships', async () => {
  onTestFailed(() => console.log(`[faults/stack] the stack's last output:\n${output.slice(-60).join('\n')}`));
  let answered = 0;
  let restartBegun!: () => void;
  const quarterAnswered = new Promise<void>((resolve) => {
    restartBegun = resolve;
  });
  const clients = Array.from({ length: CLIENTS }, async (_, index) => {
    const attempts: Attempt[] = await runClient(checkout(index));
    answered += 1;
    if (answered === CLIENTS / 4) restartBegun();
    return attempts;
  });
  // The crash falls among the clients: after a quarter of them have their answer, the rest in flight or queued.
  await quarterAnswered;
  await pgCtl(pgdata(), [
    'restart',
    '-m',
    'immediate',
    '-w',
    '-t',
    '60',
    '-l',
    path.join(pgdata(), 'restart.log'),
  ]);
  const attempts = (await Promise.all(clients)).flat();

  // Every process is alive: the runner stops the whole stack when one of them exits on its own.
  expect(output.filter((line) => line.includes('exited unexpectedly'))).toEqual([]);
  expect(stack.exitCode).toBeNull();

  const final = new Map<string, Attempt>();
  for (const attempt of attempts) final.set(attempt.intent, attempt);
  const unanswered = [...final.values()].filter((attempt) => !isDefinite(attempt.status));
  expect(unanswered.map((attempt) => `${attempt.intent}: ${attempt.status} ${attempt.error ?? ''}`)).toEqual(
    [],
  );
  const orderIds = [...final.values()].map((attempt) => orderIdOf(attempt.body));
  expect(orderIds.every((id) => id !== null)).toBe(true);
  const paidIds = orderIds.filter((id): id is string => id !== null);

  // A checkout placed after the restart, and every order before it, ship: the provider's webhook reached the
  // web app, which queued the job, which the worker ran.
  const after = await runClient({ ...checkout(CLIENTS), intent: 'after-restart', maxAttempts: 5 });
  const afterId = orderIdOf(after.at(-1)?.body ?? '');
  expect(afterId).not.toBeNull();
  await expect
    .poll(() => statusesOf([...paidIds, afterId ?? '']), { timeout: 120_000, interval: 500 })
    .toEqual(Array.from({ length: paidIds.length + 1 }, () => 'shipped'));

  const fiveXx = attempts.filter((attempt) => attempt.status >= 500 || attempt.status === 0).length;
  console.log(
    `[faults/stack] pg_ctl restart -m immediate under ${CLIENTS} clients: ${attempts.length} requests, ` +
      `${fiveXx} answered 5xx or not at all, every client answered 200, ${paidIds.length + 1} orders shipped, ` +
      'no process exited',
  );
}, 300_000);
