/**
 * Runs the real production build (`next start` of apps/web/.next, NODE_ENV=production) or the provider's
 * main.ts as a child process with exactly the environment a test gives it, to check what a deployment does
 * with a configuration: refuse to start, or serve. Needs `pnpm build` first (as `pnpm test` does).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { freePort } from '../../setup/free-port.ts';

const repoRoot = path.resolve(import.meta.dirname, '../../..');

export interface RunningProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  stdout(): string;
  stderr(): string;
}

/** Spawns `command` with only PATH and `env` (nothing leaks in from the test run); SIGKILLed after `timeoutMs`. */
export function runProcess(
  command: string[],
  cwd: string,
  env: Record<string, string>,
  timeoutMs = 60_000,
): RunningProcess {
  const [file = '', ...args] = command;
  const child = spawn(file, args, { cwd, env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    }),
  );
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

/** `next start` on `port` with NODE_ENV=production and `env`. */
export function nextStart(port: number, env: Record<string, string>): RunningProcess {
  return runProcess(
    [process.execPath, 'node_modules/next/dist/bin/next', 'start', '-p', String(port), '-H', '127.0.0.1'],
    path.join(repoRoot, 'apps/web'),
    { NEXT_TELEMETRY_DISABLED: '1', ...env, NODE_ENV: 'production' },
  );
}

/** The provider's process entry point with `env`. */
export function providerMain(env: Record<string, string>): RunningProcess {
  return runProcess(
    [process.execPath, '--import', 'tsx', 'src/main.ts'],
    path.join(repoRoot, 'apps/provider'),
    env,
  );
}

/** Secrets a production server accepts (generated, as `pnpm start` does). */
export function productionSecrets(): Record<string, string> {
  const secret = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;
  return {
    SESSION_SECRET: secret(''),
    IDEM_RESPONSE_SECRET: secret(''),
    PROVIDER_SECRET_KEY: secret('sk_test_'),
    PROVIDER_WEBHOOK_SECRET: secret('whsec_test_'),
  };
}

/** A production server that answered /api/health; `stop()` ends it. */
export async function startProductionServer(
  env: Record<string, string>,
): Promise<{ url: string; server: RunningProcess; stop(): Promise<void> }> {
  const port = await freePort();
  const server = nextStart(port, env);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (server.child.exitCode !== null) throw new Error(`next start exited: ${server.stderr()}`);
    const status = await fetch(`${url}/api/health`).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 200) break;
    if (Date.now() > deadline) throw new Error(`next start never became healthy: ${server.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    url,
    server,
    async stop() {
      server.child.kill('SIGTERM');
      await server.exited;
    },
  };
}
