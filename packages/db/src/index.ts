/**
 * The one way to get a database client in this repo. The generated client lives in ./generated (built by
 * `prisma generate`, git-ignored); everything else imports models and types from here.
 */
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.ts';
import { serialTransactions } from './serial-transactions.ts';

export * from './generated/prisma/client.ts';

export interface DatabaseOptions {
  connectionString: string;
  /** Pool size per process. Default 10, like `pg`'s own default. */
  max?: number;
  /**
   * Names the statements to prepare once per connection ('' = unnamed, planned on every execution). Pass
   * `idempotencyStatementName` from `@idem/idempotency/prisma`: it names the idempotency store's statements
   * only, whose planning costs more than their execution. Default: every statement unnamed.
   */
  statementName?: (sql: string) => string;
  /**
   * node-postgres' `query_timeout`: a query not answered within it fails on the client (the server may still be
   * running it). Default: none.
   */
  queryTimeoutMs?: number;
}

/** The pg driver adapter every client of this repo uses (wrap it before `createPrismaClient({ adapter })`). */
export function pgAdapter({
  connectionString,
  max = 10,
  statementName,
  queryTimeoutMs,
}: DatabaseOptions): PrismaPg {
  return serialTransactions(
    new PrismaPg(
      { connectionString, max, ...(queryTimeoutMs === undefined ? {} : { query_timeout: queryTimeoutMs }) },
      {
        // A dropped connection (Postgres restart, network cut) must surface as a failed query,
        // never as an unhandled 'error' event that kills the process.
        onPoolError: (error) => console.error('[db] pool error:', error.message),
        ...(statementName ? { statementNameGenerator: (query) => statementName(query.sql) } : {}),
      },
    ),
  );
}

/**
 * A client on `pgAdapter(options)`, or on the given `adapter` — e.g. `withIdempotencyFastPath(pgAdapter(…))`
 * from `@idem/idempotency/prisma`, which the idempotency store is then given too.
 */
export function createPrismaClient(options: DatabaseOptions | { adapter: PrismaPg }): PrismaClient {
  return new PrismaClient({ adapter: 'adapter' in options ? options.adapter : pgAdapter(options) });
}

export type Database = PrismaClient;
export { generateApiToken, hashApiToken } from './api-tokens.ts';
