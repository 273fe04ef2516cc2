/**
 * Starting and stopping the contenders' server processes from the harness. Each runs server-process.ts under
 * tsx with NODE_ENV=production; its stderr is kept (last lines) and shown when it fails, or live with
 * BENCH_VERBOSE=1. Every child is also killed if the harness process exits first (e.g. Ctrl-C in run.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { benchRoot } from '../repository.ts';
import type { ServerName } from './server-names.ts';

export interface ServerProcess {
  name: string;
  url: string;
  /** The server's process id (for its CPU time); 0 when the platform gave none. */
  pid: number;
  stop(): Promise<void>;
}

const SERVER_ENTRY = path.join(import.meta.dirname, 'server-process.ts');
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export async function startServerProcess(
  server: ServerName,
  instance: string,
  env: NodeJS.ProcessEnv,
  verbose: boolean,
): Promise<ServerProcess> {
  const name = `${server}#${instance}`;
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER_ENTRY, server], {
    cwd: benchRoot,
    env: { ...process.env, ...env, NODE_ENV: 'production' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => live.delete(child));

  const stderr: string[] = [];
  if (child.stderr)
    createInterface({ input: child.stderr }).on('line', (line) => {
      if (verbose) console.error(`[${name}] ${line}`);
      stderr.push(line);
      if (stderr.length > 30) stderr.shift();
    });

  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 90 s`)), 90_000);
    const fail = () => {
      clearTimeout(timer);
      reject(new Error(`${name} exited before it listened:\n${stderr.join('\n')}`));
    };
    child.once('exit', fail);
    if (!child.stdout) return fail();
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (verbose) console.log(`[${name}] ${line}`);
      const ready = line.startsWith('{"ready"') ? (JSON.parse(line) as { ready: number }).ready : undefined;
      if (ready === undefined) return;
      clearTimeout(timer);
      child.off('exit', fail);
      resolve(ready);
    });
  }).catch(async (error: unknown) => {
    child.kill('SIGKILL');
    await exited;
    throw error;
  });

  return {
    name,
    url: `http://127.0.0.1:${port}`,
    pid: child.pid ?? 0,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
