/** SQL helpers shared by the store, the key operations and the schema: one quoting rule, one error test. */

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
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const candidate = current as {
      code?: unknown;
      originalCode?: unknown;
      message?: unknown;
      cause?: unknown;
      meta?: unknown;
    };
    if (candidate.code === sqlState || candidate.originalCode === sqlState) return true;
    if (typeof candidate.message === 'string' && candidate.message.includes(sqlState)) return true;
    if (message && typeof candidate.message === 'string' && message.test(candidate.message)) return true;
    current =
      candidate.cause ?? (candidate.meta as { driverAdapterError?: unknown } | undefined)?.driverAdapterError;
  }
  return false;
}
