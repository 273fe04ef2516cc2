/**
 * Connection pool and the provider's own schema. The provider shares a Postgres server (often the same database)
 * with the checkout app, so everything lives in the `provider` schema and never touches `public`.
 */
import { Pool, type PoolClient } from 'pg';

export type { Pool, PoolClient };

/** The subset of pg used by the data modules, so they work with a pool or a transaction's client alike. */
export interface Queryable {
  query: PoolClient['query'];
}

/** Connections per provider process; concurrent requests beyond this queue for a connection. */
export const POOL_SIZE = 10;

export function createPool(databaseUrl: string, log: (line: string) => void): Pool {
  const pool = new Pool({
    connectionString: databaseUrl,
    max: POOL_SIZE,
    // Fail a request instead of hanging forever when the pool is exhausted or the server is unreachable.
    connectionTimeoutMillis: 10_000,
    application_name: 'idem-provider',
  });
  // An idle client can die (server restart, network blip). Without this listener pg re-emits it as an
  // uncaught 'error' event and the whole process crashes; the pool replaces the client on the next checkout.
  pool.on('error', (err) => {
    log(`provider: idle database connection error: ${err.message}`);
  });
  return pool;
}

// Any fixed 64-bit number works; it only has to be the same for every provider process on this database.
const SCHEMA_LOCK_ID = 4_216_330_718_001n;

const SCHEMA_DDL = `
CREATE SCHEMA IF NOT EXISTS provider;

CREATE TABLE IF NOT EXISTS provider.charges (
  id              text PRIMARY KEY,
  -- Insertion order: created_at is the transaction start time and ties within a millisecond are common,
  -- so listing "oldest first" needs a second, strictly increasing key.
  seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  amount          integer NOT NULL CHECK (amount > 0),
  currency        text NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
  source          text NOT NULL,
  order_ref       text NOT NULL,
  description     text,
  status          text NOT NULL CHECK (status IN ('succeeded', 'failed')),
  failure_code    text,
  failure_message text,
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS charges_order_ref_idx ON provider.charges (order_ref, created_at, seq);

CREATE TABLE IF NOT EXISTS provider.idempotency_keys (
  -- Keys are scoped per API key, like Stripe: the same key sent with another secret is unrelated.
  scope           text NOT NULL,
  key             text NOT NULL,
  fingerprint     text NOT NULL,
  -- NULL only inside the claiming transaction; committed rows always carry the stored response.
  response_status integer,
  -- Stored as text (not jsonb) so a replay is byte-identical to the first response.
  response_body   text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, key)
);
`;

/**
 * Creates the schema idempotently. `IF NOT EXISTS` alone is not enough when several providers start at once
 * (two concurrent CREATEs of the same object race on the catalog's unique index and one fails), so the DDL runs
 * under a transaction-scoped advisory lock: later starters wait, then find everything already there.
 */
export async function ensureSchema(pool: Pool): Promise<void> {
  await withTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK_ID.toString()]);
    await client.query(SCHEMA_DDL);
  });
}

/** Runs `fn` in a transaction on one pooled client; rolls back on any error and rethrows it. */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch {
      // The connection itself is unusable (e.g. server gone): drop it instead of returning it to the pool.
      broken = true;
    }
    throw err;
  } finally {
    client.release(broken);
  }
}
