/** SQL helpers shared by the store, the key operations and the schema: one quoting rule, one error test. */
import { someInChain } from '../stores/error-chain.ts';

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

/** `name` or `schema.name`, as quoted SQL identifiers; anything else is refused (it is spliced into SQL). */
export function quoteTable(name: string): string {
  if (!TABLE_NAME.test(name)) throw new Error(`Invalid table name: ${name}`);
  return name
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}

/** The table's own name, without its schema: what index names are made from. */
export function bareTableName(name: string): string {
  quoteTable(name);
  return name.split('.').at(-1) ?? name;
}

/**
 * Finds a Postgres SQLSTATE anywhere in an error's chain (Prisma wraps driver errors differently by path), or
 * `message` in one of its messages (some paths keep only the text).
 */
export function hasPostgresCode(error: unknown, sqlState: string, message?: RegExp): boolean {
  return someInChain(
    error,
    (candidate) =>
      candidate.code === sqlState ||
      candidate.originalCode === sqlState ||
      (typeof candidate.message === 'string' &&
        (candidate.message.includes(sqlState) || message?.test(candidate.message) === true)),
  );
}
