/** The MariaDB store's setup errors: server faults (500, cause logged), each saying how to fix it. */
import { IdempotencyStoreSetupError } from '../core/errors.ts';
import { KeyTableMissingError, missingTableExplainer } from '../stores/missing-table.ts';
import { hasMariadbErrno, MARIADB_KEY_COLUMN_BYTES, MARIADB_RESPONSE_BYTES } from './sql.ts';

/** MariaDB's ER_NO_SUCH_TABLE: also what a missing database in a qualified `table` option gives. */
const NO_SUCH_TABLE = 1146;

/** Where the table is missing and how to create it, the end of `MariadbIdempotencyTableMissingError`'s message. */
const MARIADB_TABLE_HOW_TO =
  'MariaDB database. Create it: add `mariadbIdempotencyKeysSchema().prismaModel` to a schema.prisma whose ' +
  'provider is "mysql" and run `prisma migrate dev`, or run `mariadbIdempotencyKeysSchema().ddl`. A table of ' +
  'another name: pass `{ table }` to createMariadbIdempotencyStore and mariadbIdempotencyKeysSchema alike.';

export class MariadbIdempotencyTableMissingError extends KeyTableMissingError {
  override readonly name = 'MariadbIdempotencyTableMissingError';
  protected override whereAndHow(): string {
    return MARIADB_TABLE_HOW_TO;
  }
}

/**
 * A scope or procedure path longer than its VARBINARY column: refused before any SQL (strict mode would fail the
 * statement; a non-strict server would truncate it silently and two different scopes would share keys).
 */
export class MariadbKeyColumnTooLongError extends IdempotencyStoreSetupError {
  override readonly name = 'MariadbKeyColumnTooLongError';
  constructor(
    readonly column: keyof typeof MARIADB_KEY_COLUMN_BYTES,
    readonly bytes: number,
  ) {
    super(
      `The idempotency ${column} is ${bytes} bytes (UTF-8); the MariaDB key table holds at most ` +
        `${MARIADB_KEY_COLUMN_BYTES[column]}. Use a shorter ${column === 'scope' ? 'scope (e.g. a user id)' : column}.`,
    );
  }
}

/**
 * A response (its JSON text) larger than the `response` column (MEDIUMTEXT, 16 MiB): refused before any SQL, so
 * a server without strict mode never stores a truncated response that a replay could not parse.
 */
export class MariadbResponseTooLargeError extends IdempotencyStoreSetupError {
  override readonly name = 'MariadbResponseTooLargeError';
  constructor(readonly bytes: number) {
    super(
      `The response to store is ${bytes} bytes of JSON; the MariaDB key table holds at most ${MARIADB_RESPONSE_BYTES} ` +
        '(MEDIUMTEXT). Return less from an idempotent procedure (e.g. an id to fetch the rest with).',
    );
  }
}

/** Runs `statement`; a missing `table` is rethrown as `MariadbIdempotencyTableMissingError`. */
export const explainingMissingMariadbTable = missingTableExplainer(
  (error) => hasMariadbErrno(error, NO_SUCH_TABLE, /Table '.*' doesn't exist/i),
  MariadbIdempotencyTableMissingError,
);
