import 'server-only';
import { startJobQueue } from '@idem/jobs';
import { env } from '~/env';

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
