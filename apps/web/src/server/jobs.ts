import 'server-only';
import { fulfilmentOutbox } from '@idem/broker/outbox';
import type { Prisma } from '@idem/db';
import { enqueueFulfilment, prismaTransactionDb, startJobQueue } from '@idem/jobs';
import { env } from '~/env';
import { db } from './db.ts';
import { logger } from './observability/log.ts';

type JobQueue = Awaited<ReturnType<typeof startJobQueue>>;

// One sender per server process (no maintenance, no schedules: the worker owns those); kept on globalThis
// because Next's dev server re-evaluates modules.
const cache = globalThis as unknown as { idemJobQueue?: Promise<JobQueue> };

export function jobQueue(): Promise<JobQueue> {
  cache.idemJobQueue ??= startJobQueue(env.DATABASE_URL, { role: 'sender' }).catch((error: unknown) => {
    cache.idemJobQueue = undefined; // try again on the next event instead of caching the failure
    throw error;
  });
  return cache.idemJobQueue;
}

/**
 * Starts the sender now, at server start, so the first paying transaction does not wait for it. A failure (the
 * database not up yet) is logged; the first enqueue tries again.
 */
export function warmJobQueue(): void {
  jobQueue().catch((error: unknown) => {
    logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'job queue not started yet');
  });
}

/**
 * Queues fulfilment of `orderId` inside `tx`, the transaction that made it paid (a request's, a webhook's):
 * the job (pg-boss) or the message (the outbox, with QUEUE_URL) exists if and only if that transaction commits.
 */
export async function enqueueFulfilmentIn(orderId: string, tx: Prisma.TransactionClient): Promise<void> {
  if (env.QUEUE_URL) await brokerFulfilmentMessages.enqueue(orderId, tx);
  else await enqueueFulfilment(await jobQueue(), orderId, prismaTransactionDb(tx));
}

/** With QUEUE_URL: fulfilment is a message in the outbox, which the worker relays to the broker. */
export const brokerFulfilmentMessages = fulfilmentOutbox(db);
