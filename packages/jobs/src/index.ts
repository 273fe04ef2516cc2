/** @idem/jobs — the app's job queue (pg-boss 12 in Postgres): queue names, job payloads, enqueueing. */

export { Queue, type QueueName } from '@idem/contracts';
export type { Db, Job, JobWithMetadata, PgBoss } from 'pg-boss';
export { DEFAULT_SCHEMA, type JobQueueOptions, type JobQueueRole, startJobQueue } from './boss.ts';
export { type FulfilmentJobRecord, findFulfilmentJobs, traceIdOf } from './find-jobs.ts';
export {
  enqueueFulfilment,
  type FulfilmentJob,
  type FulfilmentQueueSettings,
  fulfilmentEnvShape,
  fulfilmentJobSchema,
  fulfilmentQueueOptions,
  fulfilmentSettingsFromEnv,
} from './fulfilment.ts';
export { prismaTransactionDb, type RawQueryable } from './prisma-db.ts';
export { cleanupQueueOptions, reconcileQueueOptions } from './scheduled.ts';
export { describeZodError, intFromEnv, numberFromEnv } from './settings.ts';
export { detachV10Schema, legacySchemaName, moveV10Jobs, PgBossUpgradeError } from './upgrade-v10.ts';
