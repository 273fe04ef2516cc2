/**
 * Issues 13 and 28: the controls the fault suite and the benchmark need (fault points, an order id per attempt,
 * no lease renewal, a short lease, the benchmark procedures) live in the app's test server (apps/web/test/server),
 * which composes the app's API from the same modules. The served app — its sources, its production build and
 * its environment — carries none of them. Nor does the worker (it runs from its sources: they are its build):
 * its crash tests' pauses and dedupe-off control come from the database (apps/worker/test/fault-triggers.ts).
 *
 * Controls: the same scans find the switches in the test server's sources and the worker's fault triggers, and
 * in a build that still had them (the markers are strings the seams cannot be written without); the test server
 * does take the variables.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '@idem/dev-db/migrate';
import { describe, expect, it } from 'vitest';
import { parseServerEnv } from '../../apps/web/src/env.ts';
import { appRouter } from '../../apps/web/src/server/root.ts';
import { createTestApi } from '../../apps/web/test/server/api.ts';
import { parseTestServerSettings } from '../../apps/web/test/server/settings.ts';

const DATABASE_URL = process.env.DATABASE_URL ?? '';
const WEB = path.join(repoRoot, 'apps/web');
const WORKER = path.join(repoRoot, 'apps/worker');

const filesUnder = (dir: string, pattern: RegExp) =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => pattern.test(name))
    .map((name) => path.join(dir, name));

/** A test switch in source: a test variable, a control's name, or the modules that wire them. */
const TEST_SWITCH =
  /IDEM_TEST|IDEM_FAULT|IDEM_LEASE_SECONDS|IDEM_BENCH|TEST_SEAMS|testSeams|test-seams|fault-points|faultHooks|FaultHooks|withFaultPoint|effectIdPerAttempt|noLeaseRenewal|createBenchRouter|test\/server/;

/**
 * A test switch in the worker: the former hooks' variables, options and branches (a pause, a sleep, the dedupe
 * turned off), or the fault triggers that replace them.
 */
const WORKER_TEST_SWITCH =
  /WORKER_TEST|TEST_HOOKS|testHooks|TestHooks|test-hooks|[Dd]isableDedupe|DISABLE_DEDUPE|[Pp]erDeliveryKind|pause|Pause|PAUSE|sleep\(|pg_sleep|fault-triggers|FaultTriggers/;

/** What a built seam cannot do without: its variables' names, the benchmark's table and procedure. */
const BUILT_SEAM = /IDEM_FAULT_POINT|IDEM_TEST_|bench_effects|placeOrderUnprotected/;

function matchesIn(files: string[], pattern: RegExp): string[] {
  return files.flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .map((line, index) => ({ line, index }))
      .filter(({ line }) => pattern.test(line))
      .map(
        ({ line, index }) => `${path.relative(repoRoot, file)}:${index + 1}: ${line.trim().slice(0, 160)}`,
      ),
  );
}

describe('the served app has no test seam', () => {
  const testServer = filesUnder(path.join(WEB, 'test/server'), /\.ts$/);
  const appSources = filesUnder(path.join(WEB, 'src'), /\.tsx?$/);

  it('control: the scans find the switches where they live (the test server)', () => {
    expect(testServer.length).toBeGreaterThan(3);
    const switches = matchesIn(testServer, TEST_SWITCH);
    const builtMarkers = matchesIn(testServer, BUILT_SEAM);
    console.log(
      `[28 seams control] test server: ${switches.length} switch lines, ${builtMarkers.length} build markers`,
    );
    expect(switches.length).toBeGreaterThan(0);
    expect(builtMarkers.length).toBeGreaterThan(0);
  });

  it(`protected: none in the app's ${appSources.length} source files`, () => {
    expect(appSources.length).toBeGreaterThan(50);
    expect(matchesIn(appSources, TEST_SWITCH)).toEqual([]);
  });

  it("protected: none in the production build's server code (apps/web/.next/server)", () => {
    const built = filesUnder(path.join(WEB, '.next/server'), /\.js$/);
    expect(built.length, 'no production build of apps/web: run `pnpm build` first').toBeGreaterThan(10);
    expect(matchesIn(built, BUILT_SEAM)).toEqual([]);
  });
});

describe('the worker has no test seam', () => {
  const faultTriggers = path.join(WORKER, 'test/fault-triggers.ts');
  const workerSources = filesUnder(path.join(WORKER, 'src'), /\.ts$/);

  it("control: the scan finds the switches where they live (the crash tests' fault triggers)", () => {
    const switches = matchesIn([faultTriggers], WORKER_TEST_SWITCH);
    console.log(`[28 seams control] worker fault triggers: ${switches.length} switch lines`);
    expect(switches.length).toBeGreaterThan(3);
  });

  it(`protected: none in the worker's ${workerSources.length} source files`, () => {
    expect(workerSources.length).toBeGreaterThan(5);
    expect(matchesIn(workerSources, WORKER_TEST_SWITCH)).toEqual([]);
  });
});

describe('the served router', () => {
  it('control: the test server carries the benchmark procedures next to the checkout', () => {
    const { router } = createTestApi(parseTestServerSettings({}));
    expect(Object.keys(router._def.record).sort()).toEqual([
      'admin',
      'bench',
      'catalog',
      'checkout',
      'orders',
    ]);
  });

  it("protected: the app's router has no bench.*", () => {
    expect(Object.keys(appRouter._def.record).sort()).toEqual(['admin', 'catalog', 'checkout', 'orders']);
  });
});

describe('the test variables', () => {
  const seams = { IDEM_FAULT_POINT: 'after-claim', IDEM_TEST_NO_LEASE_RENEWAL: '1', IDEM_LEASE_SECONDS: '2' };

  it('control: the test server takes them, and refuses a bad one by name', () => {
    expect(parseTestServerSettings(seams)).toMatchObject({
      faultPoint: 'after-claim',
      noLeaseRenewal: true,
      leaseSeconds: 2,
    });
    expect(() => parseTestServerSettings({ IDEM_FAULT_POINT: 'sometimes' })).toThrow(/IDEM_FAULT_POINT/);
  });

  it("protected: the app's environment does not know them: set, they change nothing", () => {
    const base = { DATABASE_URL };
    expect(parseServerEnv({ ...base, ...seams }, { production: false })).toEqual(
      parseServerEnv(base, { production: false }),
    );
  });
});
