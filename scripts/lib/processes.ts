/**
 * Child processes of the local stack: started with prefixed output, stopped together. When one dies on its
 * own the others are stopped too, so a half-running stack never lingers.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  exited: Promise<number | null>;
}

export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; color: number },
): ManagedProcess {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const prefix = `\x1b[${options.color}m[${name}]\x1b[0m `;
  for (const stream of [child.stdout, child.stderr]) {
    if (stream)
      createInterface({ input: stream }).on('line', (line) => process.stdout.write(`${prefix}${line}\n`));
  }
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', (error) => {
      process.stdout.write(`${prefix}failed to start: ${error.message}\n`);
      resolve(1);
    });
  });
  return { name, child, exited };
}

/** Resolves when `proc` prints a line matching `pattern`; rejects if it exits first or `timeoutMs` passes. */
export function waitForOutput(proc: ManagedProcess, pattern: RegExp, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (chunk: Buffer) => {
      seen = `${seen}${chunk.toString('utf8')}`.slice(-4_096);
      if (pattern.test(seen)) done();
    };
    const timer = setTimeout(
      () => done(new Error(`${proc.name} printed nothing like ${pattern} within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    function done(error?: Error) {
      clearTimeout(timer);
      proc.child.stdout?.off('data', onData);
      if (error) reject(error);
      else resolve();
    }
    proc.child.stdout?.on('data', onData);
    void proc.exited.then((code) => done(new Error(`${proc.name} exited (code ${code}) before ${pattern}`)));
  });
}

/** SIGTERM, then SIGKILL after `graceMs` for anything still alive. */
export async function stopProcesses(processes: ManagedProcess[], graceMs = 8_000): Promise<void> {
  await Promise.all(
    processes.map(async ({ child, exited }) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    }),
  );
}

export async function waitForHttp(url: string, timeoutMs: number, isAlive: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive()) throw new Error(`stopped before ${url} answered`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${url} did not answer within ${timeoutMs / 1000} s`);
}
