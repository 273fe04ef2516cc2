/** The retry link's defaults. The header names live in `../protocol.ts`, shared with the server half. */

/** Total attempts of a keyed mutation, the first one included. */
export const DEFAULT_MAX_ATTEMPTS = 5;
export const DEFAULT_BASE_DELAY_MS = 500;
export const DEFAULT_MAX_DELAY_MS = 5_000;
/** A server-sent `Retry-After` is honoured up to this long. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 30_000;
