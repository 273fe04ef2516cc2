import 'server-only';
import { createPrismaClient, type Database } from '@idem/db';
import { env } from '~/env';

// One client per server process; Next's dev server re-evaluates modules on edit, so keep it on globalThis.
const cache = globalThis as unknown as { idemDb?: Database };

// Every statement unnamed, the store's included: preparing them halves their SQL time but, through Prisma's pg
// adapter, made the whole protected request slower on a quiet machine (docs/BENCHMARKS.md, issue 14's profile).
export const db: Database = cache.idemDb ?? createPrismaClient({ connectionString: env.DATABASE_URL });
if (process.env.NODE_ENV !== 'production') cache.idemDb = db;
