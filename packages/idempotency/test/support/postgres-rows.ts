/** The store contract's row access (support/store-contract.ts) in Postgres' SQL: shared by the Prisma store's tests. */
import type { Database } from '@idem/db';
import type { RecordKey } from '../../src/index.ts';
import type { EngineRows, RowFacts } from './store-contract.ts';

const where = 'scope = $1 and procedure = $2 and key = $3';
const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];
/** `seconds` from the database's now(), as SQL (null: no time). */
const fromNow = (seconds: number | null) =>
  seconds === null ? 'null' : `now() + make_interval(secs => ${seconds})`;

/** Postgres' own SQL for the rows the store contract looks at, on `db`'s key table. */
export function postgresRows(db: Database): EngineRows {
  return {
    async setTime(key, column, seconds) {
      await db.$executeRawUnsafe(
        `update idempotency_keys set ${column} = now() + make_interval(secs => $4::double precision) where ${where}`,
        ...keyParams(key),
        seconds,
      );
    },
    async readRow(key) {
      const rows = await db.$queryRawUnsafe<RowFacts[]>(
        `select http_status as "httpStatus",
              extract(epoch from expires_at - created_at)::float8 as "retentionSeconds",
              extract(epoch from locked_until - created_at)::float8 as "leaseSeconds",
              extract(epoch from locked_until - now())::float8 as "leaseLeftSeconds",
              extract(epoch from now() - created_at)::float8 as "ageSeconds"
       from idempotency_keys where ${where}`,
        ...keyParams(key),
      );
      return rows[0] ?? null;
    },
    async rowCount(key) {
      const rows = await db.$queryRawUnsafe<Array<{ n: number }>>(
        `select count(*)::int as n from idempotency_keys where ${where}`,
        ...keyParams(key),
      );
      return rows[0]?.n ?? -1;
    },
    // A copy of the real key table, indexes and all.
    async createKeyTable(table) {
      await db.$executeRawUnsafe(`create table "${table}" (like idempotency_keys including all)`);
    },
    async dropTable(table) {
      await db.$executeRawUnsafe(`drop table "${table}"`);
    },
    async seed(table, procedure, shape, count) {
      const owner = shape.state === 'processing' ? 'gen_random_uuid()' : 'null';
      await db.$executeRawUnsafe(
        `insert into "${table}" (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at)
       select 'cleanup', $1, i::text, repeat('0', 64), $2, ${owner}, ${fromNow(shape.lockedUntil)},
              ${fromNow(shape.createdAt)}, ${fromNow(shape.expiresAt)}
       from generate_series(1, $3::int) i`,
        procedure,
        shape.state,
        count,
      );
    },
    async countsByProcedure(table) {
      const rows = await db.$queryRawUnsafe<Array<{ procedure: string; n: number }>>(
        `select procedure, count(*)::int as n from "${table}" group by procedure`,
      );
      return Object.fromEntries(rows.map((row) => [row.procedure, row.n]));
    },
  };
}
