/**
 * Upgrading a database left by pg-boss 10. pg-boss 11 rewrote its schema and ships no migration from 10's
 * (schema version 24): pg-boss 12's own start() on it fails ("the oldest supported starting version is 25"),
 * and its release notes say to move the jobs over by hand. This does that, once, on the first start:
 *
 *   1. `detachV10Schema`: a schema still at version 24 is renamed `<schema>_v10`, so pg-boss 12 installs a
 *      fresh one under the usual name.
 *   2. `moveV10Jobs` (after the queues exist): every job of ours still waiting, retrying or active in the old
 *      schema is inserted into the new one with its id, data and retry settings (through pg-boss's own
 *      insert(), so nothing here knows the new tables), and deleted from the old one in the same
 *      transaction. A job is therefore in exactly one of the two schemas at every moment, and a second start
 *      (or two at once) finds nothing left to move.
 *
 * Both steps hold one advisory lock per schema. The old schema keeps the history (completed jobs, archive);
 * drop it when that is no longer wanted. All processes of the old version must be stopped first: a pg-boss 10
 * process still running would read and write the new tables with its old SQL.
 */

import pg from 'pg';
import type { JobInsert, PgBoss } from 'pg-boss';

/** pg-boss 10.x's last schema version (10.1 … 10.4). */
const V10_SCHEMA_VERSION = 24;

/** Where `detachV10Schema` puts a pg-boss 10 schema. */
export function legacySchemaName(schema: string): string {
  return `${schema}_v10`;
}

export class PgBossUpgradeError extends Error {
  override name = 'PgBossUpgradeError';
}

/** Renames `schema` to `<schema>_v10` if pg-boss 10 left it; returns whether it did. Run before boss.start(). */
export async function detachV10Schema(connectionString: string, schema: string): Promise<boolean> {
  return withLockedTransaction(connectionString, schema, async (client) => {
    const version = await schemaVersion(client, schema);
    if (version === null || version > V10_SCHEMA_VERSION) return false;
    if (version < V10_SCHEMA_VERSION)
      throw new PgBossUpgradeError(
        `pg-boss schema "${schema}" is at version ${version}: start pg-boss 10.4 on it once (it migrates to ${V10_SCHEMA_VERSION}), then upgrade`,
      );
    const legacy = legacySchemaName(schema);
    if (await schemaExists(client, legacy))
      throw new PgBossUpgradeError(
        `pg-boss schema "${schema}" is pg-boss 10's, and "${legacy}" already exists: move or drop one of them`,
      );
    await client.query(`alter schema ${ident(schema)} rename to ${ident(legacy)}`);
    return true;
  });
}

/**
 * Moves the queued jobs of `queues` from `<schema>_v10` into the started pg-boss 12 `boss`, which must already
 * have those queues. Returns how many it moved; 0 when there is no old schema or nothing left in it.
 */
export async function moveV10Jobs(
  boss: PgBoss,
  connectionString: string,
  schema: string,
  queues: readonly string[],
): Promise<number> {
  const legacy = legacySchemaName(schema);
  return withLockedTransaction(connectionString, schema, async (client) => {
    if ((await schemaVersion(client, legacy)) !== V10_SCHEMA_VERSION) return 0;
    const { rows } = await client.query<V10JobRow>(
      `select id::text, name, data, priority, retry_limit, retry_delay, retry_backoff, start_after,
              singleton_key, extract(epoch from expire_in)::int as expire_in_seconds, dead_letter
         from ${ident(legacy)}.job
        where name = any($1::text[]) and state in ('created', 'retry', 'active')
        order by created_on
          for update`,
      [queues],
    );
    const db = {
      executeSql: async (text: string, values: unknown[] = []) => ({
        rows: (await client.query(text, values)).rows,
      }),
    };
    for (const name of new Set(rows.map((row) => row.name))) {
      const jobs = rows.filter((row) => row.name === name).map(toJobInsert);
      await boss.insert(name, jobs, { db });
    }
    if (rows.length > 0)
      await client.query(`delete from ${ident(legacy)}.job where id = any($1::uuid[])`, [
        rows.map((row) => row.id),
      ]);
    return rows.length;
  });
}

interface V10JobRow {
  id: string;
  name: string;
  data: object | null;
  priority: number;
  retry_limit: number;
  retry_delay: number;
  retry_backoff: boolean;
  start_after: Date;
  singleton_key: string | null;
  expire_in_seconds: number;
  dead_letter: string | null;
}

/** An active job (its pg-boss 10 worker was stopped mid-run) is queued again: delivery is at least once. */
function toJobInsert(row: V10JobRow): JobInsert {
  return {
    id: row.id,
    ...(row.data === null ? {} : { data: row.data }),
    priority: row.priority,
    retryLimit: row.retry_limit,
    retryDelay: row.retry_delay,
    retryBackoff: row.retry_backoff,
    startAfter: row.start_after,
    expireInSeconds: Math.max(1, row.expire_in_seconds),
    ...(row.singleton_key ? { singletonKey: row.singleton_key } : {}),
    ...(row.dead_letter ? { deadLetter: row.dead_letter } : {}),
  };
}

async function withLockedTransaction<T>(
  connectionString: string,
  schema: string,
  fn: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client({ connectionString, application_name: 'idem-pgboss-upgrade' });
  await client.connect();
  try {
    await client.query('begin');
    try {
      await client.query('select pg_advisory_xact_lock(hashtext($1))', [`idem.pgboss-upgrade.${schema}`]);
      const result = await fn(client);
      await client.query('commit');
      return result;
    } catch (error) {
      await client.query('rollback').catch(() => {});
      throw error;
    }
  } finally {
    await client.end().catch(() => {});
  }
}

async function schemaVersion(client: pg.Client, schema: string): Promise<number | null> {
  const { rows } = await client.query<{ exists: string | null }>('select to_regclass($1) as exists', [
    `${ident(schema)}.version`,
  ]);
  if (!rows[0]?.exists) return null;
  const version = await client.query<{ version: string }>(`select version from ${ident(schema)}.version`);
  const value = version.rows[0]?.version;
  return value === undefined ? null : Number.parseInt(value, 10);
}

async function schemaExists(client: pg.Client, schema: string): Promise<boolean> {
  const { rows } = await client.query('select 1 from pg_namespace where nspname = $1', [schema]);
  return rows.length > 0;
}

function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
