/** The retry link's defaults. The header names live in `../protocol.ts`, shared with the server half. */

/**
 * Total attempts of a keyed mutation, the first one included. With the default delays the 7 waits between them
 * have ceilings 0.5, 1, 2, 4, 5, 5, 5 s and each is drawn from the upper half of its ceiling: 11.25 s in all at
 * the least, 22.5 s at the most, 16.9 s on average — longer than a server restart, so one is ridden out.
 */
export const DEFAULT_MAX_ATTEMPTS = 8;
/** The first wait's ceiling; each next one doubles, up to `DEFAULT_MAX_DELAY_MS`. */
export const DEFAULT_BASE_DELAY_MS = 500;
export const DEFAULT_MAX_DELAY_MS = 5_000;
/** A server-sent `Retry-After` is honoured up to this long. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 30_000;
