/** The real process: `src/main.ts` started the way `pnpm start` does, checked through its exit codes and output. */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const APP_DIR = fileURLToPath(new URL('..', import.meta.url));

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function runMain(env: Record<string, string>): Run {
  // A clean environment: the suite's own DATABASE_URL must not leak into "missing DATABASE_URL" cases.
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: APP_DIR,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

async function waitForUrl(run: Run): Promise<string> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const match = /provider listening on (http:\/\/\S+)/.exec(run.stdout());
    if (match?.[1] !== undefined) return match[1];
    if (run.child.exitCode !== null) throw new Error(`exited early: ${run.stderr()}`);
    if (Date.now() > deadline) throw new Error(`no listening line; stderr: ${run.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** One line, no stack trace: what an operator should see for a configuration problem. */
function expectOneCleanLine(text: string, pattern: RegExp): void {
  const lines = text.trimEnd().split('\n');
  expect(lines, text).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(text).not.toMatch(/\n\s+at /);
}

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.drop();
});

describe('src/main.ts', () => {
  it('exits 1 with one clear line when DATABASE_URL is missing', async () => {
    const run = runMain({});
    expect(await run.exited).toBe(1);
    expectOneCleanLine(run.stderr(), /^provider: invalid environment: DATABASE_URL is required/);
    expect(run.stdout()).toBe('');
  });

  it('exits 1 with one clear line for an invalid PORT', async () => {
    const run = runMain({ DATABASE_URL: db.url, PORT: 'eighty' });
    expect(await run.exited).toBe(1);
    expectOneCleanLine(run.stderr(), /PORT must be an integer/);
  });

  it('exits 1 with one clear line when the port is busy', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const run = runMain({ DATABASE_URL: db.url, PORT: String(port) });
      expect(await run.exited).toBe(1);
      expectOneCleanLine(
        run.stderr(),
        new RegExp(`^provider: port ${port} on 127\\.0\\.0\\.1 is already in use`),
      );
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it('exits 1 with one clear line when the database is unreachable, without printing the password', async () => {
    const run = runMain({ DATABASE_URL: 'postgresql://someone:hunter2@127.0.0.1:1/nope', PORT: '0' });
    expect(await run.exited).toBe(1);
    expectOneCleanLine(
      run.stderr(),
      /^provider: cannot start with database postgresql:\/\/someone:\*\*\*@127\.0\.0\.1:1\/nope: /,
    );
    expect(run.stderr()).not.toContain('hunter2');
  });

  it.each(['SIGTERM', 'SIGINT'] as const)('serves, logs its URL, and exits 0 on %s', async (signal) => {
    const run = runMain({ DATABASE_URL: db.url, PORT: '0', PROVIDER_SECRET_KEY: 'sk_test_main' });
    const url = await waitForUrl(run);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(run.stdout().trimEnd().split('\n')).toHaveLength(1);

    expect((await fetch(`${url}/health`)).status).toBe(200);
    const authed = await fetch(`${url}/v1/charges?order=x`, {
      headers: { Authorization: 'Bearer sk_test_main' },
    });
    expect(authed.status).toBe(200);
    await authed.body?.cancel();
    const knobs = await fetch(`${url}/__knobs`);
    expect(knobs.status).toBe(404); // off unless PROVIDER_TEST_KNOBS=1
    await knobs.body?.cancel();

    run.child.kill(signal);
    expect(await run.exited).toBe(0);
    expect(run.stderr()).toBe('');
  });

  it('enables the knobs with PROVIDER_TEST_KNOBS=1', async () => {
    const run = runMain({ DATABASE_URL: db.url, PORT: '0', PROVIDER_TEST_KNOBS: '1' });
    try {
      const url = await waitForUrl(run);
      const res = await fetch(`${url}/__knobs`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        latencyMs: 0,
        chargeHold: false,
        failNext: 0,
        dropResponseNext: 0,
        webhookDuplicates: 0,
        webhookHold: false,
        webhookFailNext: 0,
      });
    } finally {
      run.child.kill('SIGTERM');
      expect(await run.exited).toBe(0);
    }
  });
});
