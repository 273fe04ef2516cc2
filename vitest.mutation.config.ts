/**
 * The library's own tests as `pnpm test:mutation` (Stryker, stryker.config.mjs) runs them against each mutant:
 * the root config's database setup (one scratch database per Stryker worker, since each worker is its own
 * Vitest instance), in the America/New_York zone, without the tests that check the library from outside — they build, pack or compile a copy
 * of `src/`, which in the sandbox is Stryker's instrumented code, and no mutant is active in their processes.
 */
import { defineConfig } from 'vitest/config';
import root from './vitest.config.ts';

export default defineConfig({
  ...root,
  test: {
    ...root.test,
    projects: undefined,
    // In the stricter zone (see the new-york project in vitest.config.ts): a mutant that reads a UTC date as
    // local time survives on a UTC machine otherwise.
    env: { TZ: 'America/New_York' },
    setupFiles: ['tests/setup/env.ts', 'tests/setup/time-zone.ts'],
    // A focused run may name the test files it runs (comma-separated globs, e.g.
    // MUTATION_TESTS='packages/idempotency/test/http-*.test.ts'): fewer tests can only detect fewer mutants, so
    // its score is a lower bound of the whole suite's, and its dry run takes seconds instead of minutes.
    include: process.env.MUTATION_TESTS?.split(',') ?? ['packages/idempotency/test/**/*.test.ts'],
    exclude: [
      'packages/idempotency/test/packaging.test.ts',
      'packages/idempotency/test/newcomer.test.ts',
      'packages/idempotency/test/procedure-mark-types.test.ts',
    ],
  },
});
