/** Server environment, parsed once. Import `env` instead of reading process.env anywhere else. */
import 'server-only';
import { z } from 'zod';

const isProduction = process.env.NODE_ENV === 'production';
// Only for `pnpm dev` and tests: a production server refuses to start without a real secret.
const DEV_SESSION_SECRET = 'idem-dev-session-secret-not-for-production-0001';

const schema = z.object({
  DATABASE_URL: z.url({ error: 'DATABASE_URL must be a postgresql:// URL (pnpm dev sets it for you)' }),
  PROVIDER_URL: z.url().default('http://127.0.0.1:4000'),
  PROVIDER_SECRET_KEY: z.string().min(1).default('sk_test_idem'),
  /** Signs the provider's webhooks (`Idem-Signature`); the simulated provider's test-mode default. */
  PROVIDER_WEBHOOK_SECRET: z.string().min(1).default('whsec_test_idem'),
  /**
   * Test-only: `1` lets the Playwright/vitest suites switch a dedupe off to show the duplicate it prevents
   * (see server/test-hooks.ts). Never set in production.
   */
  IDEM_TEST_HOOKS: z.enum(['0', '1']).default('0'),
  /** Benchmark-only: `1` mounts the `bench.*` procedures (scripts/bench/run.ts). Never set in production. */
  IDEM_BENCH_ROUTES: z.enum(['0', '1']).default('0'),
  /** How often each server process adds its buffered outcome counts to `idempotency_stats` (the dashboard). */
  IDEM_STATS_FLUSH_SECONDS: z.coerce.number().positive().max(3600).default(5),
  SESSION_SECRET: isProduction
    ? z.string().min(32, 'SESSION_SECRET must be at least 32 characters')
    : z.string().min(32).default(DEV_SESSION_SECRET),
  /** Secure cookies need HTTPS; local `next start` on http://localhost must still work. */
  COOKIE_SECURE: z
    .enum(['true', 'false'])
    .default('false')
    .transform((value) => value === 'true'),
});

export type Env = z.infer<typeof schema>;

// `next build` imports route modules to collect page data but never serves a request: don't demand runtime
// secrets there (the same idea as create-t3-app's SKIP_ENV_VALIDATION).
const isBuildPhase = process.env.NEXT_PHASE === 'phase-production-build';

export const env: Env = schema.parse(
  isBuildPhase
    ? {
        DATABASE_URL: 'postgresql://build-time-placeholder/none',
        SESSION_SECRET: DEV_SESSION_SECRET,
        ...process.env,
      }
    : process.env,
);
