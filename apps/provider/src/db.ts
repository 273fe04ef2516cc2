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

-- Added with refunds. Checked first, so a restart on an up-to-date schema takes no ACCESS EXCLUSIVE lock on charges.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                  WHERE table_schema = 'provider' AND table_name = 'charges' AND column_name = 'refunded') THEN
    ALTER TABLE provider.charges
      ADD COLUMN refunded    boolean NOT NULL DEFAULT false,
      ADD COLUMN refunded_at timestamptz;
  END IF;
END
$$;

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

-- Full refunds only, so at most one per charge (UNIQUE backs up the guarded UPDATE in refunds.ts).
CREATE TABLE IF NOT EXISTS provider.refunds (
  id              text PRIMARY KEY,
  charge_id       text NOT NULL UNIQUE REFERENCES provider.charges (id),
  amount          integer NOT NULL CHECK (amount > 0),
  status          text NOT NULL CHECK (status = 'succeeded'),
  created_at      timestamptz NOT NULL DEFAULT now()
);

-- Written in the same transaction as the charge/refund it describes.
CREATE TABLE IF NOT EXISTS provider.events (
  id              text PRIMARY KEY,
  seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  type            text NOT NULL CHECK (type IN ('charge.succeeded', 'charge.failed', 'charge.refunded')),
  charge_id       text NOT NULL REFERENCES provider.charges (id),
  -- json, not jsonb: the exact text is kept, and it is what gets POSTed and signed.
  payload         json NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS events_charge_id_idx ON provider.events (charge_id, seq);
-- The trace of the request that caused the event (W3C traceparent), sent with its webhook; not signed data.
ALTER TABLE provider.events ADD COLUMN IF NOT EXISTS traceparent text;

-- The webhook outbox: one row per event that had an endpoint when it was recorded (same transaction).
-- A row is claimed by pushing next_attempt_at forward (a lease) with FOR UPDATE SKIP LOCKED, so concurrent
-- provider processes never hold the same row at once; attempts counts claims.
CREATE TABLE IF NOT EXISTS provider.webhook_deliveries (
  event_id        text PRIMARY KEY REFERENCES provider.events (id),
  event_seq       bigint NOT NULL,
  url             text NOT NULL,
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_attempt_at timestamptz,
  delivered_at    timestamptz,
  -- Set when the last allowed attempt failed: the delivery was given up.
  failed_at       timestamptz,
  last_status     integer,
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS webhook_deliveries_due_idx ON provider.webhook_deliveries (url, next_attempt_at, event_seq)
  WHERE delivered_at IS NULL AND failed_at IS NULL;
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

/**
 * Lends `use` a pooled client and gives it back. pg-pool listens for a client's 'error' only while the client is
 * idle; a connection that dies while it is checked out (a database restart: `read ECONNRESET`) emits an 'error'
 * nobody hears, which crashes the process. This listens for as long as the client is out, and a client that
 * errored, or that `use` marks broken, is destroyed on release instead of going back to the pool.
 */
export async function withClient<T>(
  pool: Pool,
  use: (client: PoolClient, markBroken: () => void) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  // Stays attached to a broken client: it is destroyed, and a late second error must not crash anything either.
  const onError = () => {
    broken = true;
  };
  client.on('error', onError);
  try {
    return await use(client, () => {
      broken = true;
    });
  } finally {
    if (!broken) client.off('error', onError);
    client.release(broken);
  }
}

/** Runs `fn` in a transaction on one pooled client; rolls back on any error and rethrows it. */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  return withClient(pool, async (client, markBroken) => {
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
        markBroken();
      }
      throw err;
    }
  });
}
