/**
 * A store or cleanup call on a database that has no key table: Prisma's raw "relation … does not exist"
 * becomes an error that says which table is missing and how to create it.
 */
import { IdempotencyStoreSetupError } from '../core/errors.ts';
import { hasPostgresCode } from './sql.ts';

/** Postgres' SQLSTATEs for a missing relation and for a missing schema (a qualified `table` option). */
const UNDEFINED_TABLE = '42P01';
const UNDEFINED_SCHEMA = '3F000';

export class IdempotencyTableMissingError extends IdempotencyStoreSetupError {
  override readonly name = 'IdempotencyTableMissingError';
  constructor(
    readonly table: string,
    options: { cause: unknown },
  ) {
    super(
      `The idempotency table ${table} does not exist in this database. Create it: add ` +
        '`idempotencyKeysSchema().prismaModel` (the README\'s "The Prisma model") to schema.prisma and run ' +
        '`prisma migrate dev`, or run `idempotencyKeysSchema().ddl`. A table of another name or schema: pass ' +
        '`{ table }` to createPrismaIdempotencyStore and idempotencyKeysSchema alike.',
      options,
    );
  }
}

/** Runs `statement`; a missing `table` is rethrown as `IdempotencyTableMissingError`. */
export async function explainingMissingTable<T>(table: string, statement: () => PromiseLike<T>): Promise<T> {
  try {
    return await statement();
  } catch (error) {
    if (
      hasPostgresCode(error, UNDEFINED_TABLE, /relation .* does not exist/i) ||
      hasPostgresCode(error, UNDEFINED_SCHEMA, /schema .* does not exist/i)
    )
      throw new IdempotencyTableMissingError(table, { cause: error });
    throw error;
  }
}
