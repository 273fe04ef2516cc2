/**
 * A plain HTTP response as both adapters hold it while deciding what to do with it: status, headers in order
 * (a repeated `Set-Cookie` stays two entries) and the body's bytes.
 */
export interface HttpAnswer {
  status: number;
  headers: ReadonlyArray<readonly [name: string, value: string]>;
  body: Uint8Array<ArrayBuffer>;
}

/** Statuses whose response has no body by definition (RFC 9110): a `Response` with one cannot be built. */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

export function hasNullBody(status: number): boolean {
  return NULL_BODY_STATUSES.has(status);
}
