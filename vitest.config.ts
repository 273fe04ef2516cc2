import path from 'node:path';
import { defineConfig } from 'vitest/config';

const POLL = { poll: { timeout: 15_000 } };

export default defineConfig({
  resolve: {
    alias: {
      '~': path.resolve(import.meta.dirname, 'apps/web/src'),
      // Next's marker package throws outside React Server Components; tests call server code directly.
      'server-only': path.resolve(import.meta.dirname, 'tests/setup/empty-module.ts'),
    },
  },
  test: {
    globalSetup: ['tests/setup/database.ts'],
    setupFiles: ['tests/setup/env.ts'],
    testTimeout: 30_000,
    // expect.poll waits for something that is certain to happen; its default of 1 s is a race with the clock
    // that a loaded machine loses (a handler not yet inside its procedure after 1 s, with the other suites
    // running beside it). A poll that fails still fails, only later.
    expect: POLL,
    // Vitest's default is one worker per core but one: on a 2-core machine one, and the files run one after the
    // other. They mostly wait (on Postgres, MariaDB, child processes), so three at once fill the two cores; four
    // were a little faster but squeezed the timing of the SIGKILL suite's lease tests (figures: README, CI).
    maxWorkers: 3,
    hookTimeout: 120_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'default',
          include: [
            '{apps,packages,tooling,examples}/*/test/**/*.test.ts',
            'tests/integration/**/*.test.ts',
            'tests/faults/**/*.test.ts',
            'tests/adversarial/**/*.test.ts',
          ],
        },
      },
      {
        // The library's database-free tests again, in a zone that is not UTC: a local-time reading of an HTTP
        // date (or any date meant as UTC) passes on a UTC machine and fails here.
        test: {
          name: 'new-york',
          include: [
            'packages/idempotency/test/{canonical-json,client-context,client-key,client-link,client-retry-policy,config,fingerprint,key,payload-equals,properties-model}.test.ts',
            'packages/idempotency/test/react-*.test.ts',
          ],
          env: { TZ: 'America/New_York' },
          expect: POLL,
          setupFiles: ['tests/setup/time-zone.ts'],
        },
      },
    ],
  },
});
