/**
 * The worker process: `pnpm --filter @idem/worker start` (or `node --import tsx apps/worker/src/main.ts`).
 * SIGINT/SIGTERM stop it gracefully (running jobs get WORKER_SHUTDOWN_GRACE_SECONDS to finish); a second
 * signal exits at once.
 */
import { brokerKindOf, redactedQueueUrl } from '@idem/broker';
import { parseWorkerEnv, WorkerEnvError } from './env.ts';
import { startWorker, workerOptionsFromEnv } from './index.ts';
import { consoleLogger as log, messageOf } from './log.ts';

let env: ReturnType<typeof parseWorkerEnv>;
try {
  env = parseWorkerEnv();
} catch (error) {
  if (!(error instanceof WorkerEnvError)) throw error;
  log.error(error.message);
  process.exit(1);
}

let worker: Awaited<ReturnType<typeof startWorker>>;
try {
  worker = await startWorker(workerOptionsFromEnv(env, log));
} catch (error) {
  log.error(`worker failed to start: ${messageOf(error)}`);
  process.exit(1);
}

const cleanup = env.cleanupCron === null ? 'cleanup schedule off' : `cleanup cron "${env.cleanupCron}" UTC`;
const reconcile =
  env.reconcileCron === null
    ? 'reconciler schedule off'
    : `reconciler cron "${env.reconcileCron}" UTC, settles after ${env.reconcileSettleAfterSeconds} s`;
const fulfilment = env.queue
  ? `fulfilment on ${brokerKindOf(env.queue.url)} ${redactedQueueUrl(env.queue.url)}, namespace ${env.queue.namespace}, ` +
    `${env.fulfilmentConcurrency} at once`
  : `fulfilment expiry ${env.fulfilment.expireInSeconds} s, ${env.fulfilmentConcurrency} loop(s)`;
log.info(
  `worker ready: queues ${worker.queues.join(', ')} (pg-boss schema ${env.schema}; ${fulfilment}; ${cleanup}; ${reconcile})`,
);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) {
      log.info(`${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    log.info(`${signal}: stopping (up to ${env.shutdownGraceSeconds} s for running jobs)`);
    worker.stop({ graceSeconds: env.shutdownGraceSeconds }).then(
      () => {
        log.info('worker stopped');
        process.exit(0);
      },
      (error: unknown) => {
        log.error('worker did not stop cleanly', error);
        process.exit(1);
      },
    );
  });
}
