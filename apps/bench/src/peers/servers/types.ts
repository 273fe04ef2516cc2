/** What every contender's server module gets and gives back (see ../server-process.ts). */
import type { Server } from 'node:http';
import type { Database } from '@idem/db';

export interface ServerDeps {
  /** This process's Prisma client (`createPrismaClient`, the same pool size for every contender). */
  db: Database;
  /** The adapter `db` runs on (`withIdempotencyFastPath`, transparent to the others): Idem's store `fastPath`. */
  dbAdapter: object;
  /** Redis for the peers that keep their records there (a dedicated database index). */
  redisUrl: string;
  /** Prefix of every Redis key this server writes; the harness deletes exactly these keys. */
  keyPrefix: string;
}

export interface StartedServer {
  server: Server;
  /** Releases what the module opened besides the HTTP server and the database (e.g. a Redis client). */
  close(): Promise<void>;
}

export type StartServer = (deps: ServerDeps) => Promise<StartedServer>;
