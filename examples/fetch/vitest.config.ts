import { defineConfig } from 'vitest/config';

// `pnpm test` here (DATABASE_URL: a server where the test may create a database). The repository's root run
// includes this test too, with its own config and database server.
export default defineConfig({
  test: { include: ['test/**/*.test.ts'], testTimeout: 60_000, hookTimeout: 120_000 },
});
