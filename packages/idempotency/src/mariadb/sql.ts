/** SQL helpers of the MariaDB store: one quoting rule, the column limits, one error test. */
import { someInChain } from '../stores/error-chain.ts';

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

/** `name` or `database.name`, as quoted identifiers; anything else is refused (it is spliced into SQL). */
export function quoteMariadbTable(name: string): string {
  if (!TABLE_NAME.test(name)) throw new Error(`Invalid table name: ${name}`);
  return name
    .split('.')
    .map((part) => `\`${part}\``)
    .join('.');
}

/** The table's own name, without its database: what index names are made from. */
export function bareMariadbTableName(name: string): string {
  quoteMariadbTable(name);
  return name.split('.').at(-1) ?? name;
}

/**
 * The primary key's columns are VARBINARY (see schema.ts): these are their sizes in bytes (UTF-8). InnoDB caps
 * an index at 3072 bytes; 512 + 255 + 255 stays well below it.
 */
export const MARIADB_KEY_COLUMN_BYTES = { scope: 512, procedure: 255, key: 255 } as const;

/** MEDIUMTEXT's capacity in bytes: the largest stored response (its JSON text, UTF-8). */
export const MARIADB_RESPONSE_BYTES = 16_777_215;

/**
 * Finds a MariaDB error number anywhere in an error's chain (Prisma wraps driver errors differently by path:
 * `errno` on the driver's error, `originalCode` on the adapter's, or only in the message text).
 */
export function hasMariadbErrno(error: unknown, errno: number, message?: RegExp): boolean {
  return someInChain(
    error,
    (candidate) =>
      candidate.errno === errno ||
      String(candidate.originalCode) === String(errno) ||
      (typeof candidate.message === 'string' && message?.test(candidate.message) === true),
  );
}
