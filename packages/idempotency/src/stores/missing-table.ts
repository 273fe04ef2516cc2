/**
 * A store call on a database that has no key table: the driver's raw "no such table" becomes an error that says
 * which table is missing and how to create it on that database.
 */
import { IdempotencyStoreSetupError } from '../core/errors.ts';

/** Each dialect's error says where the table is missing and how to create it there (`whereAndHow`). */
export abstract class KeyTableMissingError extends IdempotencyStoreSetupError {
  constructor(
    readonly table: string,
    options: { cause: unknown },
  ) {
    super('', options);
    this.message = `The idempotency table ${table} does not exist in this ${this.whereAndHow()}`;
  }

  /** "database. Create it: …", read by the constructor: a method, so that it is there before any field. */
  protected abstract whereAndHow(): string;
}

/**
 * `explaining(table, statement)` runs `statement`; an error `isMissingTable` recognises is rethrown as the
 * dialect's `KeyTableMissingError` for `table`, with the driver's error as its cause.
 */
export function missingTableExplainer(
  isMissingTable: (error: unknown) => boolean,
  MissingError: new (table: string, options: { cause: unknown }) => KeyTableMissingError,
) {
  return async function explaining<T>(table: string, statement: () => PromiseLike<T>): Promise<T> {
    try {
      return await statement();
    } catch (error) {
      if (isMissingTable(error)) throw new MissingError(table, { cause: error });
      throw error;
    }
  };
}
