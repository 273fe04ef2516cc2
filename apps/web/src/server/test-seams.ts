/**
 * TEST-ONLY: the one place where test controls are wired into a served router. A process started with
 * IDEM_TEST_SEAMS=1 (the fault suite's and the benchmark's `next start`) serves `createTestSeamsRouter`'s router:
 * the app's router built with the dependencies the IDEM_TEST_* / IDEM_FAULT_* variables ask for, plus the
 * benchmark procedures. Every other process serves `appRouter` unchanged. The router, the tRPC setup, the
 * idempotency setup and the webhook handler know nothing of this module.
 */
import 'server-only';
import { randomUUID } from 'node:crypto';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { env, type TestSeamSettings } from '~/env';
import { db, dbAdapter } from './db.ts';
import { faultHooksFor } from './fault-points.ts';
import { idempotency as appIdempotency, createAppIdempotency } from './idempotency.ts';
import { enqueueFulfilmentIn } from './jobs.ts';
import { appRouter, createAppRouter } from './root.ts';
import { createBenchRouter } from './routers/bench.ts';
import { orderIdForIntent } from './services/place-order.ts';
import { createTRPCRouter } from './trpc.ts';

/**
 * The app's procedures with the requested controls, and `bench.*` for apps/bench; with the idempotency
 * instance they were built with (the HTTP handler recognises its procedures by it).
 */
export function createTestSeamsApi(seams: TestSeamSettings) {
  const idempotency = createAppIdempotency({
    // CONTROL: without renewal a slow live owner loses its lease and a retry takes over while it runs.
    store: createPrismaIdempotencyStore(db, { leaseRenewal: !seams.noLeaseRenewal, fastPath: dbAdapter }),
    ...(seams.leaseSeconds === null ? {} : { leaseSeconds: seams.leaseSeconds }),
    ...(seams.faultPoint === null
      ? {}
      : {
          faultHooks: faultHooksFor({
            point: seams.faultPoint,
            onceFile: seams.faultOnceFile,
            rate: seams.faultRate,
          }),
        }),
  });
  const router = createTRPCRouter({
    ...createAppRouter({
      idempotency,
      // CONTROL: a fresh order (so a fresh provider key) per attempt, i.e. effects not derived from the intent.
      orderIdFor: seams.effectIdPerAttempt ? () => randomUUID() : orderIdForIntent,
      newOrderLimit: env.newOrderLimit,
      enqueueFulfilment: enqueueFulfilmentIn,
    })._def.record,
    bench: createBenchRouter(idempotency),
  });
  return { router, idempotency };
}

/** What the HTTP API serves: the test build in a process started with IDEM_TEST_SEAMS=1, else the app's. */
export const servedApi = env.testSeams
  ? createTestSeamsApi(env.testSeams)
  : { router: appRouter, idempotency: appIdempotency };
