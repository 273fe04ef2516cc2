import { randomBytes } from 'node:crypto';
import { defineConfig, devices } from '@playwright/test';

const port = Number(process.env.E2E_PORT ?? 3100);
const providerPort = Number(process.env.E2E_PROVIDER_PORT ?? 4100);
export const baseURL = `http://127.0.0.1:${port}`;
// The stack is a production build: it refuses the provider's public demo API key and closes /api/metrics
// behind a token. Both are generated per run and shared with the specs (they read charges from the provider,
// and may scrape the metrics) through the environment the workers inherit.
process.env.E2E_PROVIDER_SECRET_KEY ??= `sk_e2e_${randomBytes(32).toString('base64url')}`;
process.env.E2E_METRICS_TOKEN ??= `idem_metrics_e2e_${randomBytes(32).toString('base64url')}`;

export default defineConfig({
  // Browser suites: the checkout's own (e2e) and the careless-client / attacker cases (adversarial).
  testDir: 'tests',
  testMatch: ['e2e/**/*.spec.ts', 'adversarial/**/*.spec.ts'],
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: process.env.CI ? [['list']] : [['list'], ['html', { open: 'never' }]],
  // Runs beside vitest (scripts/test.ts), on a machine that may be busy: a web-first assertion waits for a state
  // that is certain to come, so its wait is generous (Playwright's default is 5 s); a wrong state still fails.
  timeout: 90_000,
  expect: { timeout: 15_000 },
  use: {
    baseURL,
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
  },
  projects: [
    {
      name: 'chromium',
      use: {
        ...devices['Desktop Chrome'],
        // Debian's chromium: Playwright's own browser download is not reachable here.
        launchOptions: {
          executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
          args: [
            '--disable-background-networking',
            '--disable-component-update',
            '--disable-sync',
            '--no-first-run',
          ],
        },
      },
    },
  ],
  webServer: {
    // A fresh database for the run (dropped on exit), the provider with its test knobs, and `next start`.
    command: 'node --import tsx scripts/stack.ts e2e',
    url: `${baseURL}/api/health`,
    env: {
      PORT: String(port),
      PROVIDER_PORT: String(providerPort),
      EMBEDDED_PG_PORT: process.env.E2E_PG_PORT ?? '54339',
      PROVIDER_SECRET_KEY: process.env.E2E_PROVIDER_SECRET_KEY,
      METRICS_TOKEN: process.env.E2E_METRICS_TOKEN,
      // Every browser of the run is a guest at 127.0.0.1: together past the production limit of new orders per
      // client address (tested on its own in tests/adversarial/new-order-limit.test.ts).
      IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS: '1000000',
    },
    reuseExistingServer: false,
    timeout: 180_000,
    stdout: 'pipe',
    gracefulShutdown: { signal: 'SIGTERM', timeout: 15_000 },
  },
});
