/** The worker's environment, parsed once at start. A bad or missing value stops the worker with its name. */
import { queueEnvShape, queueSettingsOf } from '@idem/broker';
import { describeZodError, fulfilmentEnvShape, intFromEnv, numberFromEnv } from '@idem/jobs';
import { z } from 'zod';

const blankIsUnset = (value: unknown) => (value === '' ? undefined : value);

const envSchema = z.object({
  DATABASE_URL: z
    .string({
      error: (issue) =>
        issue.input === undefined
          ? 'is required: the Postgres URL of the shop database, e.g. postgresql://postgres@127.0.0.1:5432/idem'
          : 'must be a string',
    })
    .refine((value) => /^postgres(ql)?:\/\/.+/.test(value), 'must be a postgres:// or postgresql:// URL'),
  NODE_ENV: z.string().optional(),
  /** pg-boss's schema; the web app must use the same. */
  PGBOSS_SCHEMA: z.preprocess(
    blankIsUnset,
    z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,49}$/, 'must be a plain Postgres identifier')
      .default('pgboss'),
  ),
  ...fulfilmentEnvShape,
  /** Fulfilment on RabbitMQ (amqp://) or NATS JetStream (nats://) instead of pg-boss; the web app needs the same. */
  ...queueEnvShape,
  WORKER_FULFILMENT_CONCURRENCY: intFromEnv(1, 2),
  WORKER_POLLING_INTERVAL_SECONDS: numberFromEnv(0.5, 2),
  WORKER_MAINTENANCE_INTERVAL_SECONDS: intFromEnv(1, 10),
  WORKER_SHUTDOWN_GRACE_SECONDS: numberFromEnv(1, 10),
  /** Cron (UTC) of the cleanup job; `off` removes the schedule (e.g. when `pnpm idem:cleanup` runs from cron). */
  IDEM_CLEANUP_CRON: z.preprocess(blankIsUnset, z.string().default('*/5 * * * *')),
  IDEM_CLEANUP_BATCH: intFromEnv(1, 10_000),
  /** Keep processed events at least as long as the provider retries a webhook (Stripe: 3 days). */
  PROCESSED_EVENTS_RETENTION_HOURS: intFromEnv(1, 72),
  /** The payment provider the reconciler asks about pending orders (same values as the web app's). */
  PROVIDER_URL: z.preprocess(blankIsUnset, z.url('must be an http(s) URL').default('http://127.0.0.1:4000')),
  PROVIDER_SECRET_KEY: z.preprocess(blankIsUnset, z.string().min(1).optional()),
  /** Cron (UTC) of the payment reconciler; `off` removes the schedule. */
  IDEM_RECONCILE_CRON: z.preprocess(blankIsUnset, z.string().default('* * * * *')),
  /** A pending order is settled from the provider's answer once its last charge attempt is this old. */
  RECONCILE_SETTLE_AFTER_SECONDS: intFromEnv(30, 300),
});

export interface WorkerEnv {
  databaseUrl: string;
  schema: string;
  fulfilment: { expireInSeconds: number; retryLimit: number; retryDelaySeconds: number };
  fulfilmentConcurrency: number;
  /** Fulfilment's broker; undefined: pg-boss. */
  queue: { url: string; namespace: string } | undefined;
  pollingIntervalSeconds: number;
  maintenanceIntervalSeconds: number;
  shutdownGraceSeconds: number;
  /** null: no schedule. */
  cleanupCron: string | null;
  cleanupBatchSize: number;
  processedEventsRetentionHours: number;
  provider: { baseUrl: string; secretKey: string };
  /** null: no schedule. */
  reconcileCron: string | null;
  reconcileSettleAfterSeconds: number;
}

export class WorkerEnvError extends Error {
  override name = 'WorkerEnvError';
}

export function parseWorkerEnv(source: NodeJS.ProcessEnv = process.env): WorkerEnv {
  const parsed = envSchema.safeParse(source);
  if (!parsed.success) {
    throw new WorkerEnvError(`Invalid worker environment: ${describeZodError(parsed.error)}`);
  }
  const env = parsed.data;
  const cron = env.IDEM_CLEANUP_CRON.trim();
  const reconcileCron = env.IDEM_RECONCILE_CRON.trim();
  return {
    databaseUrl: env.DATABASE_URL,
    schema: env.PGBOSS_SCHEMA,
    fulfilment: {
      expireInSeconds: env.FULFILMENT_EXPIRE_SECONDS,
      retryLimit: env.FULFILMENT_RETRY_LIMIT,
      retryDelaySeconds: env.FULFILMENT_RETRY_DELAY_SECONDS,
    },
    fulfilmentConcurrency: env.WORKER_FULFILMENT_CONCURRENCY,
    queue: queueSettingsOf(env),
    pollingIntervalSeconds: env.WORKER_POLLING_INTERVAL_SECONDS,
    maintenanceIntervalSeconds: env.WORKER_MAINTENANCE_INTERVAL_SECONDS,
    shutdownGraceSeconds: env.WORKER_SHUTDOWN_GRACE_SECONDS,
    cleanupCron: cron.toLowerCase() === 'off' ? null : cron,
    cleanupBatchSize: env.IDEM_CLEANUP_BATCH,
    processedEventsRetentionHours: env.PROCESSED_EVENTS_RETENTION_HOURS,
    provider: {
      baseUrl: env.PROVIDER_URL,
      secretKey: providerSecretKey(env.PROVIDER_SECRET_KEY, env.NODE_ENV),
    },
    reconcileCron: reconcileCron.toLowerCase() === 'off' ? null : reconcileCron,
    reconcileSettleAfterSeconds: env.RECONCILE_SETTLE_AFTER_SECONDS,
  };
}

/** The simulated provider's public test key: fine for `pnpm dev` and tests, refused in production. */
const DEMO_PROVIDER_SECRET_KEY = 'sk_test_idem';

function providerSecretKey(value: string | undefined, nodeEnv: string | undefined): string {
  if (nodeEnv !== 'production') return value ?? DEMO_PROVIDER_SECRET_KEY;
  if (value === undefined || value === DEMO_PROVIDER_SECRET_KEY)
    throw new WorkerEnvError(
      'Invalid worker environment: PROVIDER_SECRET_KEY must be set to a private key in production (the demo key is public)',
    );
  return value;
}
