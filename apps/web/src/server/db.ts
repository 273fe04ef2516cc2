import 'server-only';
import { createPrismaClient, type Database, pgAdapter } from '@idem/db';
import { withIdempotencyFastPath } from '@idem/idempotency/prisma';
import { env } from '~/env';

// One client per server process; Next's dev server re-evaluates modules on edit, so keep it on globalThis.
const cache = globalThis as unknown as { idemDb?: { db: Database; adapter: DatabaseAdapter } };

// The idempotency store's statements take the fast path: underneath Prisma, on the transaction's own connection
// (BEGIN with the claim, the completion with the COMMIT), prepared once per connection. The app's own statements
// stay Prisma's, unnamed.
function connect() {
  const adapter = withIdempotencyFastPath(pgAdapter({ connectionString: env.DATABASE_URL }));
  return { db: createPrismaClient({ adapter }), adapter };
}
type DatabaseAdapter = ReturnType<typeof connect>['adapter'];

const connection = cache.idemDb ?? connect();
if (process.env.NODE_ENV !== 'production') cache.idemDb = connection;

export const db: Database = connection.db;
/** The adapter `db` runs on, for the idempotency store's `fastPath`. */
export const dbAdapter: DatabaseAdapter = connection.adapter;
