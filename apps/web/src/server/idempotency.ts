/**
 * Idempotent mutations for this app: keys scoped by the principal, stored in Postgres through Prisma,
 * results serialized with the router's own transformer (superjson) so replays are byte-identical.
 */
import type { Database } from '@idem/db';
import { encryptStoredResponses, type IdempotencyStore } from '@idem/idempotency';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '@idem/idempotency/prisma';
import { createIdempotency, unstableScope } from '@idem/idempotency/trpc';
import superjson from 'superjson';
import { env } from '~/env';
import type { Principal } from './auth/principal.ts';
import { SESSION_COOKIE } from './auth/session.ts';
import { db, dbAdapter } from './db.ts';
import { logIdempotencyEvent } from './observability/log.ts';
import { recordIdempotencyEvent } from './observability/metrics.ts';
import { outcomeStats } from './observability/outcome-stats.ts';
import type { Context } from './trpc.ts';

type AuthedContext = Context & { principal: Principal };

const MINTED_SESSION_HOW_TO_FIX =
  `This request carried no session, so the server created a guest session for it; a retry without it would be ` +
  `another guest. Send the ${SESSION_COOKIE} cookie from this response's Set-Cookie with this request and every ` +
  'retry (keep cookies), or authenticate with Authorization: Bearer <token>.';

export interface AppIdempotencyOptions {
  /** The key store; the Prisma store on the app's database, with lease renewal, unless given. */
  store?: IdempotencyStore<PrismaTransactionLike<Database>>;
  /** External-mode lease for every procedure; the library's default unless given. */
  leaseSeconds?: number;
}

/**
 * The app's idempotency middleware factory. The app serves `idempotency` (all defaults); tests build their
 * own with a store (a decorated one, for the fault suite) or a lease of their choosing.
 */
export function createAppIdempotency(options: AppIdempotencyOptions = {}) {
  return createIdempotency<AuthedContext, PrismaTransactionLike<Database>>({
    // External mode renews the owner's lease while the procedure runs: a slow but live request keeps its key.
    // Stored responses hold customers' emails and orders: encrypted at rest, whichever store is given.
    store: encryptStoredResponses(
      options.store ?? createPrismaIdempotencyStore<Database>(db, { fastPath: dbAdapter }),
      { secrets: env.responseSecrets },
    ),
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
    ...(options.leaseSeconds === undefined ? {} : { defaults: { leaseSeconds: options.leaseSeconds } }),
  });
}

export type AppIdempotency = ReturnType<typeof createAppIdempotency>;

/** The middleware the app serves: the Prisma store with lease renewal, the library's lease. */
export const idempotency: AppIdempotency = createAppIdempotency();
