/**
 * Header names of the contract (duplicated from the server side on purpose: this folder is browser code and
 * must not import `../core`, which needs node:crypto).
 */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';
export const RETRY_AFTER_HEADER = 'Retry-After';

/** Total attempts of a keyed mutation, the first one included. */
export const DEFAULT_MAX_ATTEMPTS = 5;
export const DEFAULT_BASE_DELAY_MS = 500;
export const DEFAULT_MAX_DELAY_MS = 5_000;
/** A server-sent `Retry-After` is honoured up to this long. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 30_000;
