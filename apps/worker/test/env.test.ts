/** src/env.ts: one parse of the environment, clear messages, and no test variable. */
import { describe, expect, it } from 'vitest';
import { parseWorkerEnv, WorkerEnvError } from '../src/env.ts';

const url = 'postgresql://postgres@127.0.0.1:5432/idem';

describe('parseWorkerEnv', () => {
  it('needs DATABASE_URL, and says so', () => {
    expect(() => parseWorkerEnv({})).toThrow(WorkerEnvError);
    expect(() => parseWorkerEnv({})).toThrow(/DATABASE_URL: is required: the Postgres URL/);
    expect(() => parseWorkerEnv({ DATABASE_URL: 'mysql://x' })).toThrow(/DATABASE_URL: must be a postgres/);
  });

  it('defaults', () => {
    expect(parseWorkerEnv({ DATABASE_URL: url })).toEqual({
      databaseUrl: url,
      schema: 'pgboss',
      fulfilment: { expireInSeconds: 30, retryLimit: 10, retryDelaySeconds: 2 },
      fulfilmentConcurrency: 2,
      pollingIntervalSeconds: 2,
      maintenanceIntervalSeconds: 10,
      shutdownGraceSeconds: 10,
      cleanupCron: '*/5 * * * *',
      cleanupBatchSize: 10_000,
      processedEventsRetentionHours: 72,
      provider: { baseUrl: 'http://127.0.0.1:4000', secretKey: 'sk_test_idem' },
      reconcileCron: '* * * * *',
      reconcileSettleAfterSeconds: 300,
    });
  });

  it('QUEUE_URL puts fulfilment on a broker: amqp(s):// or nats:// / tls://, anything else refused by name', () => {
    expect(parseWorkerEnv({ DATABASE_URL: url }).queue).toBeUndefined();
    expect(parseWorkerEnv({ DATABASE_URL: url, QUEUE_URL: '' }).queue).toBeUndefined();
    expect(parseWorkerEnv({ DATABASE_URL: url, QUEUE_URL: 'amqp://guest:guest@mq:5672' }).queue).toEqual({
      url: 'amqp://guest:guest@mq:5672',
      namespace: 'idem',
    });
    expect(
      parseWorkerEnv({ DATABASE_URL: url, QUEUE_URL: 'nats://nats:4222', QUEUE_NAMESPACE: 'shop-eu' }).queue,
    ).toEqual({ url: 'nats://nats:4222', namespace: 'shop-eu' });
    expect(() => parseWorkerEnv({ DATABASE_URL: url, QUEUE_URL: 'redis://cache:6379' })).toThrow(
      /QUEUE_URL: redis: is not a broker Idem knows; use amqp:\/\/ or amqps:\/\/ \(RabbitMQ\), nats:\/\/ or tls:\/\/ \(NATS JetStream\)/,
    );
    expect(() => parseWorkerEnv({ DATABASE_URL: url, QUEUE_URL: 'not a url' })).toThrow(
      /QUEUE_URL: must be a URL/,
    );
    expect(() =>
      parseWorkerEnv({ DATABASE_URL: url, QUEUE_URL: 'nats://n', QUEUE_NAMESPACE: 'Shop.EU' }),
    ).toThrow(/QUEUE_NAMESPACE: a namespace must be 1–32 of a-z/);
  });

  it('reads every variable; IDEM_CLEANUP_CRON=off means no schedule; blank means default', () => {
    const env = parseWorkerEnv({
      DATABASE_URL: url,
      PGBOSS_SCHEMA: 'jobs',
      FULFILMENT_EXPIRE_SECONDS: '5',
      WORKER_FULFILMENT_CONCURRENCY: '4',
      WORKER_POLLING_INTERVAL_SECONDS: '0.5',
      IDEM_CLEANUP_CRON: 'off',
      IDEM_CLEANUP_BATCH: '',
      PROCESSED_EVENTS_RETENTION_HOURS: '96',
    });
    expect(env).toMatchObject({
      schema: 'jobs',
      fulfilment: { expireInSeconds: 5 },
      fulfilmentConcurrency: 4,
      pollingIntervalSeconds: 0.5,
      cleanupCron: null,
      cleanupBatchSize: 10_000,
      processedEventsRetentionHours: 96,
    });
  });

  it('lists every bad variable at once', () => {
    expect(() =>
      parseWorkerEnv({ DATABASE_URL: url, IDEM_CLEANUP_BATCH: '0', PGBOSS_SCHEMA: 'drop table;' }),
    ).toThrow(/PGBOSS_SCHEMA: must be a plain Postgres identifier; IDEM_CLEANUP_BATCH: Too small/);
  });

  it('knows no test variable: the former WORKER_TEST_* switches, set, change nothing (in production or not)', () => {
    const former = {
      WORKER_TEST_HOOKS: '1',
      WORKER_TEST_PAUSE_AFTER_SHIPMENT_MS: '3000',
      WORKER_TEST_PAUSE_AFTER_RECEIPT_MS: '3000',
      WORKER_TEST_DISABLE_DEDUPE: '1',
    };
    const production = { DATABASE_URL: url, NODE_ENV: 'production', PROVIDER_SECRET_KEY: 'sk_live_private' };
    for (const base of [{ DATABASE_URL: url }, production]) {
      expect(parseWorkerEnv({ ...base, ...former })).toEqual(parseWorkerEnv(base));
    }
  });

  it('refuses the public demo provider key (or none) in production', () => {
    const production = { DATABASE_URL: url, NODE_ENV: 'production' };
    expect(() => parseWorkerEnv(production)).toThrow(/PROVIDER_SECRET_KEY must be set to a private key/);
    expect(() => parseWorkerEnv({ ...production, PROVIDER_SECRET_KEY: 'sk_test_idem' })).toThrow(
      WorkerEnvError,
    );
    expect(parseWorkerEnv({ ...production, PROVIDER_SECRET_KEY: 'sk_live_x' }).provider.secretKey).toBe(
      'sk_live_x',
    );
    // Outside production the demo key stays the default, for `pnpm dev` and the tests.
    expect(parseWorkerEnv({ DATABASE_URL: url }).provider.secretKey).toBe('sk_test_idem');
  });
});
