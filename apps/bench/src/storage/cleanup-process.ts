/** Starts `cleanup-worker.ts` in its own Node process and speaks its one-line-JSON protocol. */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { benchRoot } from '../repository.ts';
import type { CleanupVariant } from './settings.ts';

const WORKER = path.join(import.meta.dirname, 'cleanup-worker.ts');

export interface CleanupOutcome {
  deleted: number;
  batches: number;
  /** The worker's own timer around the cleanup call. */
  ms: number;
}

export interface CleanupProcess {
  /** Starts the cleanup; resolves with its outcome, or undefined when it did not finish within `limitMs`. */
  run(limitMs?: number): Promise<CleanupOutcome | undefined>;
  /** Kills the process if it still runs (idempotent). */
  stop(): Promise<void>;
}

export async function startCleanupProcess(
  databaseUrl: string,
  variant: CleanupVariant,
): Promise<CleanupProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', WORKER, databaseUrl, variant.mode, String(variant.batch)],
    { cwd: benchRoot, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const messages: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  if (!child.stdout) throw new Error('cleanup worker: no stdout');
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      messages.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      return; // not ours (a library printing to stdout)
    }
    for (const wake of waiters.splice(0)) wake();
  });
  void exited.then(() => {
    for (const wake of waiters.splice(0)) wake();
  });

  async function next(limitMs: number | undefined): Promise<Record<string, unknown> | undefined> {
    const deadline = limitMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + limitMs;
    for (;;) {
      const message = messages.shift();
      if (message) {
        if (typeof message.error === 'string') throw new Error(`cleanup worker: ${message.error}`);
        return message;
      }
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`cleanup worker exited (${child.exitCode ?? child.signalCode})`);
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const timer = Number.isFinite(left) ? setTimeout(resolve, left) : undefined;
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async function stop(): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }

  const ready = await next(60_000).catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  if (!ready?.ready) {
    await stop();
    throw new Error('cleanup worker did not get ready within 60 s');
  }

  return {
    async run(limitMs) {
      child.stdin?.write('go\n');
      const done = await next(limitMs);
      if (!done) return undefined;
      return { deleted: Number(done.deleted), batches: Number(done.batches), ms: Number(done.ms) };
    },
    stop,
  };
}
