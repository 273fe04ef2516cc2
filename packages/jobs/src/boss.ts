/**
 * One started pg-boss per process. Senders (the web app) only insert jobs; workers also run pg-boss's
 * maintenance (which expires jobs whose worker died, so they are redelivered) and its cron schedules.
 */

import { Queue } from '@idem/contracts';
import { PgBoss, type QueueResult, type Queue as QueueSettings } from 'pg-boss';
import {
  type FulfilmentQueueSettings,
  fulfilmentQueueOptions,
  fulfilmentSettingsFromEnv,
} from './fulfilment.ts';
import { cleanupQueueOptions, reconcileQueueOptions } from './scheduled.ts';
import { detachV10Schema, moveV10Jobs } from './upgrade-v10.ts';

export type JobQueueRole = 'sender' | 'worker';

export interface JobQueueOptions {
  /**
   * `sender`: no maintenance, no schedules, never changes queue settings — for processes that only enqueue.
   * `worker` (default): maintenance + schedules, and brings the queues' settings in line with its own.
   */
  role?: JobQueueRole;
  /** Postgres schema of pg-boss's tables. Default `pgboss`. Senders and workers must agree. */
  schema?: string;
  /** Pool size of pg-boss's own connections. Default 2 for a sender, 4 for a worker. */
  max?: number;
  /**
   * Worker only: how often jobs past their expiry (a dead worker's) are failed, and so retried. Default 10 s
   * (pg-boss 12's own: 60 s, from superviseIntervalSeconds and monitorIntervalSeconds, both set to this).
   */
  maintenanceIntervalSeconds?: number;
  /** Default: from FULFILMENT_EXPIRE_SECONDS / FULFILMENT_RETRY_LIMIT / FULFILMENT_RETRY_DELAY_SECONDS. */
  fulfilment?: FulfilmentQueueSettings;
  /** Where pg-boss's `error` events go (they must never crash the process). Default: console.error. */
  onError?: (message: string, error: unknown) => void;
  /** `application_name` of the connections, as seen in pg_stat_activity. Default `pgboss-<role>`. */
  applicationName?: string;
}

export const DEFAULT_SCHEMA = 'pgboss';

export async function startJobQueue(
  connectionString: string,
  options: JobQueueOptions = {},
): Promise<PgBoss> {
  const role = options.role ?? 'worker';
  const worker = role === 'worker';
  const fulfilment = options.fulfilment ?? fulfilmentSettingsFromEnv();
  const onError = options.onError ?? ((message, error) => console.error(message, error));
  const schema = options.schema ?? DEFAULT_SCHEMA;
  const maintenanceInterval = options.maintenanceIntervalSeconds ?? 10;

  // pg-boss 12 cannot migrate pg-boss 10's schema itself; see upgrade-v10.ts.
  await detachV10Schema(connectionString, schema);
  const boss = new PgBoss({
    connectionString,
    schema,
    max: options.max ?? (worker ? 4 : 2),
    application_name: options.applicationName ?? `pgboss-${role}`,
    // Installs or migrates the schema; pg-boss serialises that with an advisory lock, so concurrent starts are safe.
    migrate: true,
    supervise: worker,
    schedule: worker,
    // pg-boss 12 fails expired jobs in its monitor pass: run by the supervise timer, at most once per
    // monitor interval per queue. maintenanceIntervalSeconds now only paces the deletion of old jobs.
    superviseIntervalSeconds: maintenanceInterval,
    monitorIntervalSeconds: maintenanceInterval,
    maintenanceIntervalSeconds: maintenanceInterval,
  });
  // Pool errors (a dropped connection) and worker fetch errors arrive here; unhandled, they would kill the process.
  boss.on('error', (error) => onError(`[jobs] pg-boss error: ${describeError(error)}`, error));

  await boss.start();
  try {
    const specs: QueueSpec[] = [
      { name: Queue.fulfilment, options: fulfilmentQueueOptions(fulfilment) },
      { name: Queue.cleanup, options: cleanupQueueOptions() },
      { name: Queue.reconcile, options: reconcileQueueOptions() },
    ];
    await ensureQueues(boss, role, specs);
    await moveV10Jobs(boss, connectionString, schema, Object.values(Queue));
  } catch (error) {
    await boss.stop({ graceful: false }).catch(() => {});
    throw error;
  }
  return boss;
}

interface QueueSpec {
  name: string;
  options: Omit<QueueSettings, 'name'>;
}

/**
 * Creates the missing queues; a worker also updates a queue whose settings differ from its own (so a changed
 * FULFILMENT_EXPIRE_SECONDS takes effect on the next worker start). A sender never updates: the worker owns them.
 * pg-boss 12 creates a queue under an advisory lock and ON CONFLICT DO NOTHING, so processes starting at once
 * need nothing more (pg-boss 10 deadlocked there).
 */
async function ensureQueues(boss: PgBoss, role: JobQueueRole, specs: QueueSpec[]): Promise<void> {
  const existing = new Map((await boss.getQueues()).map((queue) => [queue.name, queue]));
  for (const spec of specs) {
    const current = existing.get(spec.name);
    if (!current) {
      await boss.createQueue(spec.name, spec.options);
    } else if (role === 'worker') {
      // pg-boss cannot change a queue's policy in place (updateQueue() takes none): a queue made with
      // another policy deduplicates differently, so starting on it would be wrong, not merely stale.
      if (current.policy !== (spec.options.policy ?? 'standard'))
        throw new Error(
          `Queue "${spec.name}" has policy "${current.policy}", expected "${spec.options.policy ?? 'standard'}": delete the queue (pg-boss deleteQueue) and start again`,
        );
      if (!sameSettings(current, spec.options)) {
        const { policy: _fixed, ...settings } = spec.options;
        await boss.updateQueue(spec.name, settings);
      }
    }
  }
}

function sameSettings(current: QueueResult, wanted: Omit<QueueSettings, 'name'>): boolean {
  return (
    current.expireInSeconds === wanted.expireInSeconds &&
    current.retryLimit === wanted.retryLimit &&
    current.retryDelay === wanted.retryDelay &&
    current.retryBackoff === wanted.retryBackoff
  );
}

function describeError(error: unknown): string {
  if (error && typeof error === 'object') {
    const { message, queue } = error as { message?: unknown; queue?: unknown };
    const text = typeof message === 'string' ? message : String(error);
    return typeof queue === 'string' ? `${text} (queue ${queue})` : text;
  }
  return String(error);
}
