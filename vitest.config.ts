import path from 'node:path';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    alias: {
      '~': path.resolve(import.meta.dirname, 'apps/web/src'),
      // Next's marker package throws outside React Server Components; tests call server code directly.
      'server-only': path.resolve(import.meta.dirname, 'tests/setup/empty-module.ts'),
    },
  },
  test: {
    include: [
      '{apps,packages,examples}/*/test/**/*.test.ts',
      'tests/integration/**/*.test.ts',
      'tests/faults/**/*.test.ts',
      'tests/adversarial/**/*.test.ts',
    ],
    globalSetup: ['tests/setup/database.ts'],
    setupFiles: ['tests/setup/env.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
