/**
 * Mutation testing of the library (`pnpm test:mutation`): every mutant of packages/idempotency/src is run
 * against the library's own tests (vitest.mutation.config.ts). Per-test coverage: a mutant runs only the tests
 * that reach it. One file: `pnpm test:mutation:file packages/idempotency/src/core/handler.ts`. The whole run is
 * incremental (see `incrementalFile`): only mutants whose code or covering tests changed are run again.
 * Reports go to reports/mutation/ (git-ignored); the per-file table is printed at the end.
 */
// The tests run in America/New_York (vitest.mutation.config.ts). Stryker's runner uses worker threads, which
// cannot change the process's zone: set it here, so every test runner process starts in it.
process.env.TZ = 'America/New_York';

// Two focused runs at once need their own report folders (and `--tempDirName`): MUTATION_REPORT_DIR.
const reportDir = process.env.MUTATION_REPORT_DIR ?? 'reports/mutation';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  coverageAnalysis: 'perTest',
  mutate: ['packages/idempotency/src/**/*.ts'],
  // Only what the library's tests need is copied into each sandbox (node_modules are symlinked).
  ignorePatterns: [
    '/apps',
    '/examples',
    '/docs',
    '/tests/e2e',
    '/tests/faults',
    '/tests/adversarial',
    '/.turbo',
    // Another focused run's sandbox (its own --tempDirName).
    '/.stryker-tmp*',
  ],
  // `pnpm test:mutation` runs --incremental: results are kept per mutant, keyed by its code and the tests that
  // cover it, and a run re-tests only what changed since the last one (a whole run from nothing takes ≈ 1.5 h
  // on 2 cores). The file is committed, so a fresh clone starts from the last run; `--force` re-tests everything
  // and writes it anew. Focused runs (`pnpm test:mutation:file`) are not incremental and leave it alone.
  incrementalFile: 'packages/idempotency/mutation-baseline.json',
  // Static mutants (module-level constants: regular expressions, DEFAULT_OPTIONS, lookup tables) are reached by
  // every test, so each costs a whole suite run (≈ 2 min; 595 of them ≈ 5 h on 2 cores): skipped, and shown as
  // skipped in the table (`pnpm test:mutation:table`), not counted as detected.
  ignoreStatic: true,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: `${reportDir}/index.html` },
  jsonReporter: { fileName: `${reportDir}/mutation.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportTests: false, reportMutants: false },
  // Stryker rewrites the tsconfig's outside paths through TypeScript's JS API, which TypeScript 7 no longer has.
  // The sandbox is a copy of the whole repository, so no path leaves it: point the rewrite at no file.
  tsconfigFile: '',
  // No type checker runs (Vitest strips types), and test/public-surface.test.ts reads the entries' source text.
  disableTypeChecks: false,
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  timeoutMS: 10_000,
};
