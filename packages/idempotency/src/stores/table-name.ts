/** The key table's name when a store is given none, on every database (also a metric label). */
export const DEFAULT_IDEMPOTENCY_TABLE = 'idempotency_keys';
