/**
 * @idem/worker — runs the app's background jobs: fulfilment (ship + receipt, exactly once per order), the
 * scheduled cleanup of idempotency keys and processed events, and the payment reconciler (pending orders
 * settled from the provider's answer). `main.ts` is the process entry.
 */

import type { CleanupOptions } from '@idem/cleanup';
import { createPrismaClient, type Database } from '@idem/db';
import { type FulfilmentQueueSettings, type PgBoss, Queue, startJobQueue } from '@idem/jobs';
import { createProviderClient, type RefundingPaymentProvider } from '@idem/payments';
import type { WorkerEnv } from './env.ts';
import { DEFAULT_CLEANUP_CRON, scheduleCleanup, workCleanup } from './jobs/cleanup.ts';
import { workFulfilment } from './jobs/fulfilment.ts';
import { type BrokerFulfilment, startBrokerFulfilment } from './jobs/fulfilment-broker.ts';
import {
  DEFAULT_RECONCILE_CRON,
  fulfilmentEnqueuer,
  fulfilmentJobStatesOf,
  type ReconcileOptions,
  scheduleReconcile,
  workReconcile,
} from './jobs/reconcile.ts';
import { consoleLogger, type Logger } from './log.ts';

export interface WorkerOptions {
  databaseUrl: string;
  /** pg-boss schema. Default `pgboss`. */
  schema?: string;
  /** Expiry/retries of the fulfilment queue (the worker applies them to the queue at start). */
  fulfilment?: FulfilmentQueueSettings;
  /** Parallel fulfilment loops (on a broker: messages handled at once). Default 2. */
  fulfilmentConcurrency?: number;
  /**
   * Fulfilment on a message broker instead of pg-boss: `url` amqp://… (RabbitMQ) or nats://… (NATS JetStream).
   * The web app must be given the same QUEUE_URL, so that it writes fulfilment to the outbox this worker relays.
   */
  queue?: { url: string; namespace?: string; retryDelayMs?: number };
  /** How often an idle loop polls for a job. Default 2 s (minimum 0.5). */
  pollingIntervalSeconds?: number;
  /** How often pg-boss expires jobs whose worker died (→ redelivery). Default 10 s. */
  maintenanceIntervalSeconds?: number;
  /** Cron of the cleanup (UTC); null removes the schedule. Default every 5 minutes. */
  cleanupCron?: string | null;
  /** Batch size and retention of the cleanup. */
  cleanup?: CleanupOptions;
  /**
   * The payment provider the reconciler asks (a client, or where to reach one). Unset: no reconciler in this
   * worker (tests of the other jobs); `main.ts` always sets it.
   */
  provider?: RefundingPaymentProvider | { baseUrl: string; secretKey: string };
  /** Cron of the payment reconciler (UTC); null removes the schedule. Default every minute. */
  reconcileCron?: string | null;
  reconcile?: ReconcileOptions;
  log?: Logger;
  /** A client to use instead of creating one (it is then not disconnected by stop()). */
  db?: Database;
}

export interface RunningWorker {
  boss: PgBoss;
  db: Database;
  queues: string[];
  /** Fulfilment's broker connection and outbox, when `queue` was given. */
  broker?: BrokerFulfilment;
  /** Stops taking jobs, waits up to `graceSeconds` (default 10) for running ones, then closes connections. */
  stop(options?: { graceSeconds?: number }): Promise<void>;
}

export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  const log = options.log ?? consoleLogger;
  const db = options.db ?? createPrismaClient({ connectionString: options.databaseUrl, max: 5 });
  let boss: PgBoss | undefined;
  let broker: BrokerFulfilment | undefined;
  try {
    boss = await startJobQueue(options.databaseUrl, {
      role: 'worker',
      ...(options.schema ? { schema: options.schema } : {}),
      ...(options.fulfilment ? { fulfilment: options.fulfilment } : {}),
      maintenanceIntervalSeconds: options.maintenanceIntervalSeconds ?? 10,
      applicationName: 'idem-worker',
      onError: (message, error) => log.error(message, error),
    });
    const pollingIntervalSeconds = options.pollingIntervalSeconds ?? 2;
    const concurrency = options.fulfilmentConcurrency ?? 2;
    if (options.queue) broker = await startBrokerFulfilment(db, { ...options.queue, concurrency, log });
    else await workFulfilment(boss, db, { concurrency, pollingIntervalSeconds, log });
    await workCleanup(boss, db, { ...options.cleanup, log, pollingIntervalSeconds });
    await scheduleCleanup(
      boss,
      options.cleanupCron === undefined ? DEFAULT_CLEANUP_CRON : options.cleanupCron,
    );
    if (options.provider) {
      const provider =
        'listCharges' in options.provider ? options.provider : createProviderClient(options.provider);
      await workReconcile(
        boss,
        {
          db,
          provider,
          enqueueFulfilment: broker?.enqueueFulfilment ?? fulfilmentEnqueuer(boss),
          fulfilmentJobStates: broker?.fulfilmentJobStates ?? fulfilmentJobStatesOf(boss),
          log,
        },
        { ...options.reconcile, pollingIntervalSeconds },
      );
      await scheduleReconcile(
        boss,
        options.reconcileCron === undefined ? DEFAULT_RECONCILE_CRON : options.reconcileCron,
      );
    }
  } catch (error) {
    await broker?.stop().catch(() => {});
    await boss?.stop({ graceful: false }).catch(() => {});
    if (!options.db) await db.$disconnect().catch(() => {});
    throw error;
  }

  const running = boss;
  const onBroker = broker;
  let stopping: Promise<void> | undefined;
  return {
    boss: running,
    db,
    queues: onBroker ? [Queue.cleanup, Queue.reconcile] : [Queue.fulfilment, Queue.cleanup, Queue.reconcile],
    ...(onBroker ? { broker: onBroker } : {}),
    stop({ graceSeconds = 10 } = {}) {
      stopping ??= (async () => {
        // The broker first: no new message is taken, the ones being handled finish (or are redelivered).
        await onBroker?.stop();
        // graceful: stop polling, wait for running handlers up to the timeout, then fail what is still active
        // (→ retried by another worker) and close pg-boss's pool; resolves once all of that is done.
        await running.stop({ graceful: true, timeout: Math.max(1, graceSeconds) * 1000 });
        if (!options.db) await db.$disconnect();
      })();
      return stopping;
    },
  };
}

/** Maps the parsed environment (env.ts) to startWorker's options. */
export function workerOptionsFromEnv(env: WorkerEnv, log: Logger = consoleLogger): WorkerOptions {
  return {
    databaseUrl: env.databaseUrl,
    schema: env.schema,
    fulfilment: env.fulfilment,
    fulfilmentConcurrency: env.fulfilmentConcurrency,
    ...(env.queue ? { queue: env.queue } : {}),
    pollingIntervalSeconds: env.pollingIntervalSeconds,
    maintenanceIntervalSeconds: env.maintenanceIntervalSeconds,
    cleanupCron: env.cleanupCron,
    cleanup: {
      batchSize: env.cleanupBatchSize,
      processedEventsRetentionHours: env.processedEventsRetentionHours,
    },
    provider: env.provider,
    reconcileCron: env.reconcileCron,
    reconcile: { settleAfterSeconds: env.reconcileSettleAfterSeconds },
    log,
  };
}

export { parseWorkerEnv, type WorkerEnv, WorkerEnvError } from './env.ts';
export {
  type AuditDeps,
  type AuditOptions,
  auditOrders,
  type Violation,
  ViolationKind,
} from './jobs/audit.ts';
export { DEFAULT_CLEANUP_CRON } from './jobs/cleanup.ts';
export {
  CARRIER,
  type FulfilmentResult,
  type FulfilOptions,
  fulfilmentJobHandler,
  fulfilOrder,
  renderReceipt,
} from './jobs/fulfilment.ts';
export {
  type LateChargeDeps,
  type LateChargeSummary,
  type ReconcileDeps,
  type ReconcileOptions,
  ReconcileOutcome,
  type ReconcileSummary,
  reconcilePendingOrders,
  refundLateCharges,
  runReconcile,
} from './jobs/reconcile.ts';
export {
  type StrandedPaidDeps,
  type StrandedPaidOptions,
  type StrandedPaidSummary,
  shipStrandedPaidOrders,
} from './jobs/stranded-paid.ts';
export { consoleLogger, type Logger } from './log.ts';
