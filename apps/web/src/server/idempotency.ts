/**
 * Idempotent mutations for this app: keys scoped by the principal, stored in Postgres through Prisma,
 * results serialized with the router's own transformer (superjson) so replays are byte-identical.
 */
import type { Database } from '@idem/db';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '@idem/idempotency/prisma';
import { createIdempotency, unstableScope } from '@idem/idempotency/trpc';
import superjson from 'superjson';
import type { Principal } from './auth/principal.ts';
import { SESSION_COOKIE } from './auth/session.ts';
import { db } from './db.ts';
import { faultHooks, leaseRenewalDisabled, testLeaseSeconds } from './fault-points.ts';
import { logIdempotencyEvent } from './observability/log.ts';
import { recordIdempotencyEvent } from './observability/metrics.ts';
import { outcomeStats } from './observability/outcome-stats.ts';
import type { Context } from './trpc.ts';

type AuthedContext = Context & { principal: Principal };

// External mode renews the owner's lease while the procedure runs (built into the store): a slow but live
// request keeps its key. Renewal is off only for tests/faults (see fault-points.ts).
const store = createPrismaIdempotencyStore(db, { leaseRenewal: !leaseRenewalDisabled });

const MINTED_SESSION_HOW_TO_FIX =
  `This request carried no session, so the server created a guest session for it; a retry without it would be ` +
  `another guest. Send the ${SESSION_COOKIE} cookie from this response's Set-Cookie with this request and every ` +
  'retry (keep cookies), or authenticate with Authorization: Bearer <token>.';

export const idempotency = createIdempotency<AuthedContext, PrismaTransactionLike<Database>>({
  store,
  transformer: superjson,
  // A guest session minted for this very request is a new guest on every retry of a client that keeps no
  // cookies: the key could never deduplicate, so it is refused (400) before anything is claimed.
  getScope: (ctx) => (ctx.principalMintedNow ? unstableScope(MINTED_SESSION_HOW_TO_FIX) : ctx.principal.id),
  getRequestHeaders: (ctx) => ctx.headers,
  getResponseHeaders: (ctx) => ctx.resHeaders,
  isBatched: (ctx) => ctx.isBatch,
  isStreamed: (ctx) => ctx.isStreamed,
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
