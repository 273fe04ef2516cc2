import { readFileSync } from 'node:fs';
import path from 'node:path';
import { defineConfig } from 'vitest/config';

const POLL = { poll: { timeout: 15_000 } };

/**
 * `@idem/idempotency` and each of its subpaths → the TypeScript source of the entry its `exports` names in
 * `dist` (`./dist/<entry>.js` is built from `./src/<entry>.ts`). Everywhere else the workspace loads the library
 * the way a consumer does, from `dist` (`turbo run build` builds it first); under vitest it is the source, so a
 * test runs the code as it is now, without a rebuild, and Stryker's mutants (made in the source) are what the
 * tests reach. Processes a test starts (tsx, next) load `dist`.
 */
function librarySourceAliases(): Array<{ find: RegExp; replacement: string }> {
  const packageDir = path.resolve(import.meta.dirname, 'packages/idempotency');
  const manifest = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as {
    name: string;
    exports: Record<string, string | { default?: string }>;
  };
  return Object.entries(manifest.exports).flatMap(([subpath, target]) => {
    const entry =
      typeof target === 'string' ? undefined : /^\.\/dist\/(.+)\.js$/.exec(target.default ?? '')?.[1];
    if (!entry) return [];
    const specifier = `${manifest.name}${subpath.slice(1)}`.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    return [{ find: new RegExp(`^${specifier}$`), replacement: path.join(packageDir, 'src', `${entry}.ts`) }];
  });
}

const alias = [
  { find: '~', replacement: path.resolve(import.meta.dirname, 'apps/web/src') },
  // Next's marker package throws outside React Server Components; tests call server code directly.
  { find: 'server-only', replacement: path.resolve(import.meta.dirname, 'tests/setup/empty-module.ts') },
  ...librarySourceAliases(),
];

export default defineConfig({
  resolve: { alias },
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
        resolve: { alias },
        test: {
          name: 'new-york',
          include: [
            'packages/idempotency/test/{canonical-json,client-context,client-key,client-link,client-retry-policy,config,fingerprint,key,payload-equals,properties-model}.test.ts',
            // Reads times through a driver whose own decoding depends on the zone: its control bites only here.
            'packages/idempotency/test/mariadb-pool-store.test.ts',
            'packages/idempotency/test/review-mariadb-pool.test.ts',
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
