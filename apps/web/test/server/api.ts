/**
 * The API the test server serves: the app's own router and idempotency setup, built from the same modules with
 * the controls its settings ask for, plus `bench.*` for apps/bench.
 */
import { randomUUID } from 'node:crypto';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { env } from '~/env';
import { db, dbAdapter } from '~/server/db';
import { createAppIdempotency } from '~/server/idempotency';
import { enqueueFulfilmentIn } from '~/server/jobs';
import { createAppRouter } from '~/server/root';
import { orderIdForIntent } from '~/server/services/place-order';
import { createTRPCRouter } from '~/server/trpc';
import { createBenchRouter } from './bench-router.ts';
import { withFaultPoint } from './fault-points.ts';
import type { TestServerSettings } from './settings.ts';

/** The router and the idempotency instance it was built with (the HTTP handler recognises its procedures by it). */
export function createTestApi(settings: TestServerSettings) {
  // CONTROL (noLeaseRenewal): without renewal a slow live owner loses its lease and a retry takes over while it
  // runs.
  const store = createPrismaIdempotencyStore(db, {
    leaseRenewal: !settings.noLeaseRenewal,
    fastPath: dbAdapter,
  });
  const idempotency = createAppIdempotency({
    store:
      settings.faultPoint === null
        ? store
        : withFaultPoint(store, {
            point: settings.faultPoint,
            onceFile: settings.faultOnceFile,
            rate: settings.faultRate,
          }),
    ...(settings.leaseSeconds === null ? {} : { leaseSeconds: settings.leaseSeconds }),
  });
  const router = createTRPCRouter({
    ...createAppRouter({
      idempotency,
      // CONTROL (effectIdPerAttempt): a fresh order, so a fresh provider key, per attempt: effects not derived
      // from the intent.
      orderIdFor: settings.effectIdPerAttempt ? () => randomUUID() : orderIdForIntent,
      newOrderLimit: env.newOrderLimit,
      enqueueFulfilment: enqueueFulfilmentIn,
    })._def.record,
    bench: createBenchRouter(idempotency),
  });
  return { router, idempotency };
}
