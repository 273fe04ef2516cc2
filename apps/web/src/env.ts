/** Server environment, parsed once. Import `env` instead of reading process.env anywhere else. */
import 'server-only';
import { queueEnvShape } from '@idem/broker/outbox';
import { MIN_SECRET_LENGTH, missingProductionSecret, productionSecretProblem } from '@idem/contracts';
import { z } from 'zod';
import { EnvError } from './env-error.ts';
import { DEFAULT_KEY_LIFETIMES, type KeyLifetimes, keyLifetimeProblems } from './server/key-lifetimes.ts';
import type { NewOrderLimit } from './server/services/new-order-limit.ts';

export { EnvError };

// Only for `pnpm dev` and tests: a production server refuses to start without a real secret.
const DEV_SESSION_SECRET = 'idem-dev-session-secret-not-for-production-0001';
const DEV_RESPONSE_SECRET = 'idem-dev-response-secret-not-for-production-01';
/** The simulated provider's public test-mode values: the defaults outside production, refused in production. */
const DEMO_PROVIDER_SECRET_KEY = 'sk_test_idem';
const DEMO_PROVIDER_WEBHOOK_SECRET = 'whsec_test_idem';

/** A secret that production must be given (@idem/contracts' rule). */
function productionSecret(name: string, demoValue: string) {
  return z.string({ error: missingProductionSecret(name) }).superRefine((value, context) => {
    const problem = productionSecretProblem(name, value, demoValue);
    if (problem) context.addIssue({ code: 'custom', message: problem });
  });
}

const hours = (fallback: number) =>
  z.coerce
    .number()
    .positive()
    .max(24 * 365)
    .default(fallback);

function schemaFor(production: boolean) {
  return z
    .object({
      DATABASE_URL: z.url({ error: 'DATABASE_URL must be a postgresql:// URL (pnpm dev sets it for you)' }),
      /** Fulfilment on RabbitMQ (amqp://) or NATS JetStream (nats://): the outbox, relayed by the worker. */
      ...queueEnvShape,
      PROVIDER_URL: z.url().default('http://127.0.0.1:4000'),
      /** The provider API key (`Authorization: Bearer`), the same value the provider is started with. */
      PROVIDER_SECRET_KEY: production
        ? productionSecret('PROVIDER_SECRET_KEY', DEMO_PROVIDER_SECRET_KEY)
        : z.string().min(1).default(DEMO_PROVIDER_SECRET_KEY),
      /** Signs the provider's webhooks (`Idem-Signature`). */
      PROVIDER_WEBHOOK_SECRET: production
        ? productionSecret('PROVIDER_WEBHOOK_SECRET', DEMO_PROVIDER_WEBHOOK_SECRET)
        : z.string().min(1).default(DEMO_PROVIDER_WEBHOOK_SECRET),
      /**
       * `1`: the idempotency layer's spans join the process's traces (`@idem/idempotency/otel`). Needs an
       * OpenTelemetry SDK registered in the process to record anything; off by default.
       */
      /**
       * An OTLP/HTTP collector (e.g. `http://127.0.0.1:4318`): set, the process starts the OpenTelemetry SDK and
       * sends its traces there (server/observability/otel-sdk.ts). Unset (the default): no SDK, nothing sent.
       */
      OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
      /** The service name the traces are sent under. */
      OTEL_SERVICE_NAME: z.string().min(1).default('idem-web'),
      /** Where a trace is seen, `{traceId}` replaced (e.g. `https://jaeger.example/trace/{traceId}`): admin links. */
      IDEM_TRACE_URL: z
        .url({ protocol: /^https?$/ })
        .refine((url) => url.includes('{traceId}'), 'IDEM_TRACE_URL must contain {traceId}')
        .optional(),
      IDEM_TRACING: z
        .enum(['0', '1'])
        .default('0')
        .transform((value) => value === '1'),
      /** How often each server process adds its buffered outcome counts to `idempotency_stats` (the dashboard). */
      IDEM_STATS_FLUSH_SECONDS: z.coerce.number().positive().max(3600).default(5),
      SESSION_SECRET: production
        ? productionSecret('SESSION_SECRET', DEV_SESSION_SECRET)
        : z.string().min(MIN_SECRET_LENGTH).default(DEV_SESSION_SECRET),
      /** Encrypts the stored responses in the key table (they hold customers' emails and orders). */
      IDEM_RESPONSE_SECRET: production
        ? productionSecret('IDEM_RESPONSE_SECRET', DEV_RESPONSE_SECRET)
        : z.string().min(MIN_SECRET_LENGTH).default(DEV_RESPONSE_SECRET),
      /** Earlier response secrets, comma-separated: still read until their rows expire (rotation). */
      IDEM_RESPONSE_SECRETS_OLD: z
        .string()
        .default('')
        .transform((list) =>
          list
            .split(',')
            .map((secret) => secret.trim())
            .filter(Boolean),
        )
        .pipe(
          z.array(
            z.string().min(MIN_SECRET_LENGTH, 'each old response secret must be at least 32 characters'),
          ),
        ),
      /**
       * The bearer token `GET /api/metrics` requires. Unset: open outside production, closed (403) in production.
       */
      METRICS_TOKEN: z
        .string()
        .min(MIN_SECRET_LENGTH, `METRICS_TOKEN must be at least ${MIN_SECRET_LENGTH} characters`)
        .optional(),
      /**
       * `Secure` on the session cookies: on by default in production (they must only travel over HTTPS); off in
       * development, where the app is served over plain http://localhost.
       */
      COOKIE_SECURE: z
        .enum(['true', 'false'], { error: 'COOKIE_SECURE must be true or false' })
        .default(production ? 'true' : 'false')
        .transform((value) => value === 'true'),
      /** How long the checkout form re-sends an unresolved intent before it asks what happened instead. */
      IDEM_INTENT_MAX_AGE_HOURS: hours(DEFAULT_KEY_LIFETIMES.browserIntentHours),
      /** How long the server replays a checkout's Idempotency-Key. */
      IDEM_CHECKOUT_KEY_RETENTION_HOURS: hours(DEFAULT_KEY_LIFETIMES.serverRetentionHours),
      /** How long the payment provider remembers its Idempotency-Key (its documented retention). */
      PROVIDER_KEY_RETENTION_HOURS: hours(DEFAULT_KEY_LIFETIMES.providerRetentionHours),
      /**
       * New orders one principal may place per IDEM_NEW_ORDERS_WINDOW_SECONDS; past it the checkout answers 429
       * + Retry-After and nothing is stored, charged or reserved (card testing, a runaway client). Resuming an
       * order, and a replay, are never limited.
       */
      IDEM_NEW_ORDERS_PER_PRINCIPAL: z.coerce.number().int().positive().default(30),
      /**
       * New orders from one client address per window, whatever the principal: a script that mints a guest
       * session per checkout stops here. Generous, because customers behind one NAT share an address.
       */
      IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS: z.coerce.number().int().positive().default(60),
      /** Orders of one principal still waiting for their payment (stock reserved) at once. */
      IDEM_PENDING_ORDERS_PER_PRINCIPAL: z.coerce.number().int().positive().default(5),
      /** Reverse proxies in front of the app that append to X-Forwarded-For (see server/auth/client-address.ts). */
      IDEM_PROXY_HOPS: z.coerce.number().int().positive().max(10).default(1),
      IDEM_NEW_ORDERS_WINDOW_SECONDS: z.coerce
        .number()
        .int()
        .positive()
        .max(7 * 86_400)
        .default(600),
    })
    .transform(
      ({
        IDEM_INTENT_MAX_AGE_HOURS,
        IDEM_CHECKOUT_KEY_RETENTION_HOURS,
        PROVIDER_KEY_RETENTION_HOURS,
        IDEM_NEW_ORDERS_PER_PRINCIPAL,
        IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS,
        IDEM_PENDING_ORDERS_PER_PRINCIPAL,
        IDEM_NEW_ORDERS_WINDOW_SECONDS,
        IDEM_PROXY_HOPS,
        IDEM_RESPONSE_SECRET,
        IDEM_RESPONSE_SECRETS_OLD,
        IDEM_TRACE_URL,
        ...rest
      }) => ({
        ...rest,
        responseSecrets: [IDEM_RESPONSE_SECRET, ...IDEM_RESPONSE_SECRETS_OLD] as [string, ...string[]],
        traceUrl: IDEM_TRACE_URL ?? null,
        newOrderLimit: {
          max: IDEM_NEW_ORDERS_PER_PRINCIPAL,
          maxPerClient: IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS,
          maxPending: IDEM_PENDING_ORDERS_PER_PRINCIPAL,
          windowSeconds: IDEM_NEW_ORDERS_WINDOW_SECONDS,
        } satisfies NewOrderLimit,
        proxyHops: IDEM_PROXY_HOPS,
        keyLifetimes: {
          browserIntentHours: IDEM_INTENT_MAX_AGE_HOURS,
          serverRetentionHours: IDEM_CHECKOUT_KEY_RETENTION_HOURS,
          providerRetentionHours: PROVIDER_KEY_RETENTION_HOURS,
        } satisfies KeyLifetimes,
      }),
    )
    .superRefine(({ keyLifetimes }, context) => {
      // The chain browser < server <= provider: broken, a late retry outlives the record that would replay it.
      for (const problem of keyLifetimeProblems(keyLifetimes))
        context.addIssue({ code: 'custom', path: ['IDEM_CHECKOUT_KEY_RETENTION_HOURS'], message: problem });
    });
}

export type Env = z.infer<ReturnType<typeof schemaFor>> & {
  /** Whether the production rules applied (NODE_ENV=production): real secrets, closed metrics, Secure cookies. */
  production: boolean;
};

/** Parses an environment; production (NODE_ENV=production unless told otherwise) demands real secrets. */
export function parseServerEnv(
  source: Readonly<Record<string, string | undefined>>,
  { production = source.NODE_ENV === 'production' }: { production?: boolean } = {},
): Env {
  const result = schemaFor(production).safeParse(source);
  if (!result.success) {
    // Each problem names its variable, so the one line says what to fix.
    const problems = result.error.issues.map((issue) => {
      const name = String(issue.path[0] ?? '');
      return issue.message.includes(name) ? issue.message : `${name}: ${issue.message}`;
    });
    throw new EnvError(`invalid environment: ${problems.join('; ')}`);
  }
  return { ...result.data, production };
}

// `next build` imports route modules to collect page data but never serves a request: don't demand runtime
// secrets there (the same idea as create-t3-app's SKIP_ENV_VALIDATION).
const isBuildPhase = process.env.NEXT_PHASE === 'phase-production-build';

export const env: Env = isBuildPhase
  ? parseServerEnv(
      { DATABASE_URL: 'postgresql://build-time-placeholder/none', ...process.env },
      { production: false },
    )
  : parseServerEnv(process.env);
