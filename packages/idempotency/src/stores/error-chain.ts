/**
 * Driver errors as Prisma and the plain drivers hand them over: the code or errno may sit on the error, on its
 * `cause`, or on the adapter's error in `meta.driverAdapterError`, and some paths keep only the message text.
 */

/** What a link of the chain may carry. */
export interface DriverErrorLike {
  code?: unknown;
  errno?: unknown;
  originalCode?: unknown;
  message?: unknown;
  originalMessage?: unknown;
  cause?: unknown;
  meta?: unknown;
}

/** Whether `test` holds for any link of `error`'s chain (each link visited once, so a cycle ends). */
export function someInChain(error: unknown, test: (candidate: DriverErrorLike) => boolean): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const candidate = current as DriverErrorLike;
    if (test(candidate)) return true;
    current =
      candidate.cause ?? (candidate.meta as { driverAdapterError?: unknown } | undefined)?.driverAdapterError;
  }
  return false;
}

/** A link's text field, or '' when it holds none. */
export const textOf = (value: unknown): string => (typeof value === 'string' ? value : '');
