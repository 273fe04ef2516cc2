/**
 * The no-configuration path: with no DATABASE_URL, `pnpm start` runs a real embedded Postgres under the
 * data directory, migrates, seeds and serves; SIGINT stops everything it started. Also the clear messages for
 * a busy port and a broken data directory. Needs `pnpm build` first (`pnpm test` does it).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../setup/free-port.ts';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function tempDataDir() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'idem-embedded-'));
  tempDirs.push(dir);
  return dir;
}

interface StackRun {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function runStack(env: Record<string, string>): StackRun {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/stack.ts', 'start'], {
    cwd: repoRoot,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

function isAlive(pid: number) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('pnpm start without DATABASE_URL', () => {
  it('serves the shop on an embedded Postgres and stops it on SIGINT', { timeout: 150_000 }, async () => {
    const dataDir = tempDataDir();
    const [webPort, providerPort, pgPort] = [await freePort(), await freePort(), await freePort()];
    const run = runStack({
      IDEM_DATA_DIR: dataDir,
      PORT: String(webPort),
      PROVIDER_PORT: String(providerPort),
      EMBEDDED_PG_PORT: String(pgPort),
    });
    try {
      await waitFor(
        () => run.output().includes('checkout ready'),
        120_000,
        `the stack to start:\n${run.output()}`,
      );
      const page = await fetch(`http://127.0.0.1:${webPort}/`).then((response) => response.text());
      expect(page).toContain('Stoneware Mug');
      expect(run.output()).toContain(`embedded Postgres on 127.0.0.1:${pgPort}`);

      const postgresPid = Number(
        readFileSync(path.join(dataDir, 'postgres/postmaster.pid'), 'utf8').split('\n')[0],
      );
      expect(isAlive(postgresPid)).toBe(true);

      run.child.kill('SIGINT');
      expect(await run.exited).toBe(0);
      await waitFor(() => !isAlive(postgresPid), 10_000, 'postgres to stop');
      await expect(fetch(`http://127.0.0.1:${webPort}/`)).rejects.toThrow();
    } finally {
      run.child.kill('SIGKILL');
    }
  });

  it('names the busy port instead of printing a stack trace', { timeout: 60_000 }, async () => {
    const blocker = net.createServer();
    const busyPort = await freePort();
    await new Promise<void>((resolve) => blocker.listen(busyPort, '127.0.0.1', resolve));
    try {
      const run = runStack({
        IDEM_DATA_DIR: tempDataDir(),
        PORT: String(busyPort),
        PROVIDER_PORT: String(await freePort()),
        EMBEDDED_PG_PORT: String(await freePort()),
      });
      expect(await run.exited).toBe(1);
      expect(run.output()).toContain(`Port ${busyPort} on 127.0.0.1 is already in use`);
      expect(run.output()).not.toMatch(/^\s+at /m);
    } finally {
      blocker.close();
    }
  });

  it('explains a data directory that is not Postgres', { timeout: 60_000 }, async () => {
    const dataDir = tempDataDir();
    mkdirSync(path.join(dataDir, 'postgres'));
    writeFileSync(path.join(dataDir, 'postgres/notes.txt'), 'not a database');
    const run = runStack({
      IDEM_DATA_DIR: dataDir,
      PORT: String(await freePort()),
      PROVIDER_PORT: String(await freePort()),
      EMBEDDED_PG_PORT: String(await freePort()),
    });
    expect(await run.exited).toBe(1);
    expect(run.output()).toContain('is not a Postgres data directory');
    expect(run.output()).not.toMatch(/^\s+at /m);
  });
});
