/**
 * A store or cleanup call on a database that has no key table: Prisma's raw "relation … does not exist"
 * becomes an error that says which table is missing and how to create it.
 */
import { KeyTableMissingError, missingTableExplainer } from '../stores/missing-table.ts';
import { hasPostgresCode } from './sql.ts';

/** Postgres' SQLSTATEs for a missing relation and for a missing schema (a qualified `table` option). */
const UNDEFINED_TABLE = '42P01';
const UNDEFINED_SCHEMA = '3F000';

/** Where the table is missing and how to create it, the end of `IdempotencyTableMissingError`'s message. */
const POSTGRES_TABLE_HOW_TO =
  'database. Create it: add `idempotencyKeysSchema().prismaModel` (the README\'s "The Prisma model") to ' +
  'schema.prisma and run `prisma migrate dev`, or run `idempotencyKeysSchema().ddl`. A table of another name ' +
  'or schema: pass `{ table }` to createPrismaIdempotencyStore and idempotencyKeysSchema alike.';

export class IdempotencyTableMissingError extends KeyTableMissingError {
  override readonly name = 'IdempotencyTableMissingError';
  protected override whereAndHow(): string {
    return POSTGRES_TABLE_HOW_TO;
  }
}

/** Runs `statement`; a missing `table` is rethrown as `IdempotencyTableMissingError`. */
export const explainingMissingTable = missingTableExplainer(
  (error) =>
    hasPostgresCode(error, UNDEFINED_TABLE, /relation .* does not exist/i) ||
    hasPostgresCode(error, UNDEFINED_SCHEMA, /schema .* does not exist/i),
  IdempotencyTableMissingError,
);
