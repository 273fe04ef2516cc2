/**
 * Idempotent mutations for this app: keys scoped by the principal, stored in Postgres through Prisma,
 * results serialized with the router's own transformer (superjson) so replays are byte-identical.
 */
import type { Database } from '@idem/db';
import {
  createPrismaIdempotencyStore,
  type PrismaTransactionLike,
  withLeaseRenewal,
} from '@idem/idempotency/prisma';
import { createIdempotency } from '@idem/idempotency/trpc';
import superjson from 'superjson';
import type { Principal } from './auth/principal.ts';
import { db } from './db.ts';
import { faultHooks, leaseRenewalDisabled, testLeaseSeconds } from './fault-points.ts';
import { logIdempotencyEvent } from './observability/log.ts';
import { recordIdempotencyEvent } from './observability/metrics.ts';
import { outcomeStats } from './observability/outcome-stats.ts';
import type { Context } from './trpc.ts';

type AuthedContext = Context & { principal: Principal };

const store = createPrismaIdempotencyStore(db);

export const idempotency = createIdempotency<AuthedContext, PrismaTransactionLike<Database>>({
  // The owner renews its lease while the procedure runs (external mode): a slow but live request keeps its key.
  store: leaseRenewalDisabled ? store : withLeaseRenewal(store, db),
  transformer: superjson,
  getScope: (ctx) => ctx.principal.id,
  getRequestHeaders: (ctx) => ctx.headers,
  getResponseHeaders: (ctx) => ctx.resHeaders,
  isBatched: (ctx) => ctx.isBatch,
  // Synchronous and in memory only (the benchmark measures this path): counters, one log line, and the
  // dashboard's per-minute counts, which a background timer flushes to the database.
  onEvent(event) {
    recordIdempotencyEvent(event);
    logIdempotencyEvent(event);
    outcomeStats.record(event.procedure, event.outcome);
  },
  // Test-only (IDEM_TEST_HOOKS=1, see fault-points.ts): a short lease and SIGKILL fault points for
  // tests/faults. Both are undefined in production, which keeps the library's defaults and skips every hook.
  ...(testLeaseSeconds === undefined ? {} : { defaults: { leaseSeconds: testLeaseSeconds } }),
  ...(faultHooks === undefined ? {} : { faultHooks }),
});
