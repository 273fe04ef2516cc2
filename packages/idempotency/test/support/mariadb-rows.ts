/** MariaDB's UTC clock and key-row SQL for the MariaDB stores' tests, on any client (Prisma or the connector's pool). */
import type { ScratchMariadb } from '@idem/mariadb-test-db';
import type { RecordKey } from '../../src/index.ts';
import { mariadbIdempotencyKeysSchema, type SqlExecutor } from '../../src/mariadb/index.ts';
import type { EngineRows } from './store-contract.ts';

export const where = 'scope = ? AND `procedure` = ? AND `key` = ?';
export const keyParams = (key: RecordKey) => [key.scope, key.procedure, key.key];
/** `seconds` from the database's UTC clock, as SQL (NULL: no time). */
export const fromNow = (seconds: number | null) =>
  seconds === null ? 'NULL' : `TIMESTAMPADD(SECOND, ${seconds}, UTC_TIMESTAMP(6))`;
/** A TIMESTAMPDIFF in microseconds, in seconds. */
const seconds = (microseconds: bigint | number) => Number(microseconds) / 1e6;

/** MariaDB's own SQL for the rows the store contract looks at (times in UTC, to the microsecond). */
export function mariadbRows(db: SqlExecutor, scratch: Pick<ScratchMariadb, 'execute'>): EngineRows {
  return {
    async setTime(key, column, offset) {
      await db.$executeRawUnsafe(
        `UPDATE idempotency_keys SET ${column} = TIMESTAMPADD(MICROSECOND, ROUND(? * 1000000), UTC_TIMESTAMP(6))
       WHERE ${where}`,
        offset,
        ...keyParams(key),
      );
    },
    async readRow(key) {
      const rows = await db.$queryRawUnsafe<
        Array<{
          http_status: number | null;
          retention: bigint | number;
          lease: bigint | number | null;
          left: bigint | number | null;
          age: bigint | number;
        }>
      >(
        `SELECT http_status,
              TIMESTAMPDIFF(MICROSECOND, created_at, expires_at) AS retention,
              TIMESTAMPDIFF(MICROSECOND, created_at, locked_until) AS lease,
              TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), locked_until) AS \`left\`,
              TIMESTAMPDIFF(MICROSECOND, created_at, UTC_TIMESTAMP(6)) AS age
       FROM idempotency_keys WHERE ${where}`,
        ...keyParams(key),
      );
      const row = rows[0];
      return row
        ? {
            httpStatus: row.http_status,
            retentionSeconds: seconds(row.retention),
            leaseSeconds: row.lease === null ? null : seconds(row.lease),
            leaseLeftSeconds: row.left === null ? null : seconds(row.left),
            ageSeconds: seconds(row.age),
          }
        : null;
    },
    async rowCount(key) {
      const rows = await db.$queryRawUnsafe<Array<{ n: bigint }>>(
        `SELECT COUNT(*) AS n FROM idempotency_keys WHERE ${where}`,
        ...keyParams(key),
      );
      return Number(rows[0]?.n ?? -1);
    },
    async createKeyTable(table) {
      await scratch.execute(mariadbIdempotencyKeysSchema(table).statements);
    },
    async dropTable(table) {
      await db.$executeRawUnsafe(`DROP TABLE \`${table}\``);
    },
    async seed(table, procedure, shape, count) {
      const owner = shape.state === 'processing' ? 'UUID()' : 'NULL';
      const times = [shape.lockedUntil, shape.createdAt, shape.expiresAt].map(fromNow).join(', ');
      const row = `('cleanup', ?, ?, REPEAT('0', 64), ?, ${owner}, ${times})`;
      await db.$executeRawUnsafe(
        `INSERT INTO \`${table}\` (scope, \`procedure\`, \`key\`, fingerprint, state, lease_owner, locked_until, created_at, expires_at)
       VALUES ${Array.from({ length: count }, () => row).join(', ')}`,
        ...Array.from({ length: count }, (_, i) => [procedure, String(i + 1), shape.state]).flat(),
      );
    },
    async countsByProcedure(table) {
      // The key columns are VARBINARY: the procedure read back as text.
      const rows = await db.$queryRawUnsafe<Array<{ kind: string; n: bigint }>>(
        `SELECT CAST(\`procedure\` AS CHAR) AS kind, COUNT(*) AS n FROM \`${table}\` GROUP BY \`procedure\``,
      );
      return Object.fromEntries(rows.map((row) => [row.kind, Number(row.n)]));
    },
  };
}
