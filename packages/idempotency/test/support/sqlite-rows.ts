/** SQLite's clock and key-row SQL for the SQLite stores' tests, on any client of the file (Prisma or better-sqlite3). */
import type { RecordKey } from '../../src/index.ts';
import { type SqlExecutor, sqliteIdempotencyKeysSchema } from '../../src/sqlite/index.ts';
import type { EngineRows } from './store-contract.ts';

export const where = 'scope = ? and procedure = ? and key = ?';
export const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];
/** SQLite's now, in the store's time format (ISO-8601 UTC with milliseconds). */
export const NOW = `strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')`;
/** `seconds` from SQLite's now, as SQL (null: no time). */
export const nowPlus = (seconds: number | null) =>
  seconds === null ? 'null' : `strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '${seconds} seconds')`;
/** julianday() differences are days: in seconds. */
const secondsBetween = (from: string, to: string) => `(julianday(${to}) - julianday(${from})) * 86400`;

/** SQLite's own SQL for the rows the store contract looks at (times as text, to the millisecond). */
export function sqliteRows(db: SqlExecutor): EngineRows {
  return {
    async setTime(key, column, seconds) {
      await db.$executeRawUnsafe(
        `update idempotency_keys set ${column} = strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', ?) where ${where}`,
        `${seconds} seconds`,
        ...keyParams(key),
      );
    },
    async readRow(key) {
      const rows = await db.$queryRawUnsafe<
        Array<{
          http_status: number | bigint | null;
          retention: number;
          lease: number | null;
          left: number | null;
          age: number;
        }>
      >(
        `select http_status, ${secondsBetween('created_at', 'expires_at')} as retention,
              ${secondsBetween('created_at', 'locked_until')} as lease,
              ${secondsBetween("'now'", 'locked_until')} as left,
              ${secondsBetween('created_at', "'now'")} as age
       from idempotency_keys where ${where}`,
        ...keyParams(key),
      );
      const row = rows[0];
      return row
        ? {
            httpStatus: row.http_status === null ? null : Number(row.http_status),
            retentionSeconds: row.retention,
            leaseSeconds: row.lease,
            leaseLeftSeconds: row.left,
            ageSeconds: row.age,
          }
        : null;
    },
    async rowCount(key) {
      const rows = await db.$queryRawUnsafe<Array<{ n: bigint | number }>>(
        `select count(*) as n from idempotency_keys where ${where}`,
        ...keyParams(key),
      );
      return Number(rows[0]?.n ?? -1);
    },
    async createKeyTable(table) {
      for (const statement of sqliteIdempotencyKeysSchema(table).statements)
        await db.$executeRawUnsafe(statement);
    },
    async dropTable(table) {
      await db.$executeRawUnsafe(`drop table "${table}"`);
    },
    async seed(table, procedure, shape, count) {
      const owner = shape.state === 'processing' ? `'o'` : 'null';
      const times = [shape.lockedUntil, shape.createdAt, shape.expiresAt].map(nowPlus).join(', ');
      await db.$executeRawUnsafe(
        `with recursive n(i) as (select 1 union all select i + 1 from n where i < ?)
       insert into "${table}" (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at)
       select 'cleanup', ?, cast(i as text), 'f', ?, ${owner}, ${times} from n`,
        count,
        procedure,
        shape.state,
      );
    },
    async countsByProcedure(table) {
      const rows = await db.$queryRawUnsafe<Array<{ procedure: string; n: bigint | number }>>(
        `select procedure, count(*) as n from "${table}" group by procedure`,
      );
      return Object.fromEntries(rows.map((row) => [row.procedure, Number(row.n)]));
    },
  };
}
