import 'server-only';
import { createPrismaClient, type Database } from '@idem/db';
import { idempotencyStatementName } from '@idem/idempotency/prisma';
import { env } from '~/env';

// One client per server process; Next's dev server re-evaluates modules on edit, so keep it on globalThis.
const cache = globalThis as unknown as { idemDb?: Database };

// The idempotency store's statements are prepared once per connection (their planning costs more than
// their execution); every other statement stays unnamed.
export const db: Database =
  cache.idemDb ??
  createPrismaClient({ connectionString: env.DATABASE_URL, statementName: idempotencyStatementName });
if (process.env.NODE_ENV !== 'production') cache.idemDb = db;
