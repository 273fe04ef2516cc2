/**
 * Shared by the worker's test files. The database is the suite's migrated test database, shared with every
 * other test file running in parallel: rows are scoped by fresh order ids, and each test that runs a worker
 * gets its own pg-boss schema, so no other file's worker can take its jobs (and vice versa).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { createPrismaClient, type Database, type OrderStatus } from '@idem/db';
import type { Logger } from '../src/log.ts';

export const databaseUrl = (() => {
  const url = process.env.DATABASE_URL;
  if (!url)
    throw new Error('DATABASE_URL is not set: run the tests from the repo root (vitest global setup)');
  return url;
})();

export const repoRoot = path.resolve(import.meta.dirname, '../../..');

export function createTestDb(): Database {
  return createPrismaClient({ connectionString: databaseUrl, max: 4 });
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

export async function dropSchema(db: Database, schema: string): Promise<void> {
  await db.$executeRawUnsafe(`drop schema if exists "${schema}" cascade`);
}

export interface TestOrder {
  id: string;
  email: string;
  totalCents: number;
}

/** A fresh order with two items (and their own products), in the given status. */
export async function createOrder(db: Database, status: OrderStatus): Promise<TestOrder> {
  const tag = randomBytes(4).toString('hex');
  const [mug, tea] = await Promise.all([
    db.product.create({
      data: {
        sku: `W-MUG-${tag}`,
        name: 'Worker test mug',
        description: 'test',
        priceCents: 1250,
        stock: 10,
      },
    }),
    db.product.create({
      data: { sku: `W-TEA-${tag}`, name: 'Worker test tea', description: 'test', priceCents: 499, stock: 10 },
    }),
  ]);
  const email = `buyer-${tag}@example.test`;
  const totalCents = 2 * 1250 + 499;
  const order = await db.order.create({
    data: {
      principal: `guest:${randomUUID()}`,
      email,
      status,
      totalCents,
      items: {
        create: [
          { productId: mug.id, sku: mug.sku, name: mug.name, quantity: 2, unitPriceCents: 1250 },
          { productId: tea.id, sku: tea.sku, name: tea.name, quantity: 1, unitPriceCents: 499 },
        ],
      },
    },
  });
  return { id: order.id, email, totalCents };
}

export interface Effects {
  status: OrderStatus | undefined;
  shipments: number;
  /** Every receipt row of the order, whatever its kind (`receipt` or a per-delivery control kind). */
  receipts: Array<{ kind: string; recipient: string; subject: string; body: string }>;
}

export async function effectsOf(db: Database, orderId: string): Promise<Effects> {
  const [order, shipments, receipts] = await Promise.all([
    db.order.findUnique({ where: { id: orderId }, select: { status: true } }),
    db.shipment.count({ where: { orderId } }),
    db.outboxEmail.findMany({
      where: { orderId, kind: { startsWith: 'receipt' } },
      select: { kind: true, recipient: true, subject: true, body: true },
      orderBy: { createdAt: 'asc' },
    }),
  ]);
  return { status: order?.status, shipments, receipts };
}

export interface JobRow {
  id: string;
  state: string;
  retry_count: number;
  started_on: Date | null;
  completed_on: Date | null;
  output: unknown;
}

/** The fulfilment jobs of one order in a pg-boss schema (pg-boss 11+ keeps finished jobs in the job table). */
export async function jobsOf(db: Database, schema: string, orderId: string): Promise<JobRow[]> {
  return db.$queryRawUnsafe<JobRow[]>(
    `select id::text, state::text, retry_count, started_on, completed_on, output from "${schema}".job
       where name = 'fulfilment' and data->>'orderId' = $1
     order by started_on nulls last`,
    orderId,
  );
}

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  { timeoutMs = 20_000, intervalMs = 25 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Collects log lines instead of printing them. */
export function collectingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (line) => lines.push(line),
    error: (line, error) => lines.push(`ERROR ${line}${error === undefined ? '' : `: ${String(error)}`}`),
  };
}

export interface WorkerProcess {
  child: ChildProcess;
  /** stdout + stderr, line by line. */
  lines: string[];
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The real worker process, `node --import tsx apps/worker/src/main.ts`, as the deployment runs it. */
export function spawnWorker(env: Record<string, string>): WorkerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'apps/worker/src/main.ts'], {
    cwd: repoRoot,
    env: { ...process.env, NODE_ENV: 'test', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let onReady: () => void = () => {};
  let onFail: (error: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    onReady = resolve;
    onFail = reject;
  });
  for (const stream of [child.stdout, child.stderr]) {
    let buffered = '';
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      buffered += chunk;
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      for (const line of parts) {
        lines.push(line);
        if (line.includes('worker ready:')) onReady();
      }
    });
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      onFail(new Error(`worker exited (code ${code}, signal ${signal}) before ready:\n${lines.join('\n')}`));
      resolve({ code, signal });
    });
  });
  return { child, lines, ready, exited };
}

export async function killHard(worker: WorkerProcess): Promise<void> {
  if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
  await worker.exited;
}
