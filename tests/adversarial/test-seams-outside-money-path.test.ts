/**
 * Issue 13, "test seams outside the money path": the controls the fault, e2e and contract tests need (an order
 * id per attempt, no lease renewal, a short lease, fault points, the benchmark procedures, a webhook dedupe
 * turned off, a key per request in the browser) are injected from the test side. The app's router, its tRPC
 * and idempotency setup, the checkout form and the webhook handler contain no test branch and read no test
 * variable; one module (server/test-seams.ts) builds the test router, armed only by IDEM_TEST_SEAMS=1.
 *
 * Controls: the same pattern finds the switches in the test-seams module (so the scan can match); the test
 * build of the router does carry `bench.*`; the same fault variable with the flag set is accepted.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '@idem/dev-db/migrate';
import { describe, expect, it } from 'vitest';
import { parseServerEnv, type TestSeamSettings } from '../../apps/web/src/env.ts';
import { idempotency } from '../../apps/web/src/server/idempotency.ts';
import { appRouter } from '../../apps/web/src/server/root.ts';
import { createTestSeamsApi, servedApi } from '../../apps/web/src/server/test-seams.ts';

const DATABASE_URL = process.env.DATABASE_URL ?? '';

const web = (...parts: string[]) => path.join(repoRoot, 'apps/web/src', ...parts);
const filesUnder = (dir: string) =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => /\.tsx?$/.test(name))
    .map((name) => path.join(dir, name));

/** The money path: what a production request runs through. */
const MONEY_PATH = [
  ...filesUnder(web('server/routers')),
  ...filesUnder(web('server/webhooks')),
  web('server/root.ts'),
  web('server/trpc.ts'),
  web('server/idempotency.ts'),
  web('app/checkout/checkout-form.tsx'),
  web('app/api/webhooks/provider/route.ts'),
];

/** A test switch: a test variable, a test flag, or the module that wires the controls. */
const TEST_SWITCH =
  /IDEM_TEST|TEST_HOOKS|IDEM_FAULT|IDEM_LEASE_SECONDS|IDEM_BENCH|testSeams|test-seams|fault-points|testHooks|effectIdPerAttempt|key-per-request|idem:test|process\.env/;

function switchesIn(files: string[]): string[] {
  return files.flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .map((line, index) => ({ line, index }))
      .filter(({ line }) => TEST_SWITCH.test(line))
      .map(({ line, index }) => `${path.relative(repoRoot, file)}:${index + 1}: ${line.trim()}`),
  );
}

const NO_CONTROLS: TestSeamSettings = {
  faultPoint: null,
  faultOnceFile: null,
  faultRate: 1,
  leaseSeconds: null,
  effectIdPerAttempt: false,
  noLeaseRenewal: false,
};

describe('the money path has no test branch', () => {
  it('control: the scan finds the switches where they live (the test-seams module)', () => {
    const found = switchesIn([web('server/test-seams.ts')]);
    console.log(`[13 seams control] test switches in server/test-seams.ts: ${found.length} lines`);
    expect(found.length).toBeGreaterThan(0);
  });

  it(`protected: none in the ${MONEY_PATH.length} files of the router, tRPC and idempotency setup, form, webhooks`, () => {
    expect(MONEY_PATH.length).toBeGreaterThan(8);
    expect(switchesIn(MONEY_PATH)).toEqual([]);
  });
});

describe('the served router', () => {
  it('control: the test build carries the benchmark procedures next to the checkout', () => {
    const { router: testRouter, idempotency: testIdempotency } = createTestSeamsApi(NO_CONTROLS);
    expect(testIdempotency).not.toBe(idempotency);
    expect(Object.keys(testRouter._def.record).sort()).toEqual([
      'admin',
      'bench',
      'catalog',
      'checkout',
      'orders',
    ]);
  });

  it('protected: a process started without IDEM_TEST_SEAMS serves the app router, which has no bench.*', () => {
    expect(servedApi.router).toBe(appRouter);
    expect(servedApi.idempotency).toBe(idempotency);
    expect(Object.keys(appRouter._def.record).sort()).toEqual(['admin', 'catalog', 'checkout', 'orders']);
  });
});

describe('arming the seams', () => {
  const base = { DATABASE_URL };

  it('control: with IDEM_TEST_SEAMS=1 the fault variables are taken', () => {
    const env = parseServerEnv(
      { ...base, IDEM_TEST_SEAMS: '1', IDEM_FAULT_POINT: 'after-claim', IDEM_TEST_NO_LEASE_RENEWAL: '1' },
      { production: false },
    );
    expect(env.testSeams).toMatchObject({ faultPoint: 'after-claim', noLeaseRenewal: true });
  });

  it('protected: without the flag no seam is armed, and a seam variable is refused by name', () => {
    expect(parseServerEnv(base, { production: false }).testSeams).toBeNull();
    for (const name of [
      'IDEM_FAULT_POINT',
      'IDEM_TEST_EFFECT_ID_PER_ATTEMPT',
      'IDEM_TEST_NO_LEASE_RENEWAL',
    ]) {
      const value = name === 'IDEM_FAULT_POINT' ? 'after-claim' : '1';
      expect(() => parseServerEnv({ ...base, [name]: value }, { production: false })).toThrow(
        `${name} is a test seam: it needs IDEM_TEST_SEAMS=1`,
      );
    }
    expect(() =>
      parseServerEnv({ ...base, IDEM_TEST_SEAMS: '1', IDEM_FAULT_POINT: 'sometimes' }, { production: false }),
    ).toThrow(/IDEM_FAULT_POINT/);
  });

  it('protected: the stack runner (pnpm dev / start / e2e) refuses to start with IDEM_TEST_SEAMS=1', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/stack.ts', 'start'], {
      cwd: repoRoot,
      env: { ...process.env, IDEM_TEST_SEAMS: '1' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('IDEM_TEST_SEAMS=1 arms test-only controls');
  });
});
