/**
 * Caps how much of a request body is read. Past `maxBytes` — declared by Content-Length, or counted while a
 * chunked body streams in — reading fails and the rest is never pulled from the socket, so an oversized body
 * costs at most `maxBytes` (plus one chunk) of memory and is never parsed, hashed or verified.
 */

export class BodyTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`The request body is larger than ${maxBytes} bytes.`);
    this.name = 'BodyTooLargeError';
  }
}

/**
 * The request with its body capped: reading it past `maxBytes` fails with `tooLarge()` (a BodyTooLargeError
 * unless the caller's framework wants its own error, e.g. tRPC's PAYLOAD_TOO_LARGE).
 */
export function limitBody(
  req: Request,
  maxBytes: number,
  tooLarge: () => Error = () => new BodyTooLargeError(maxBytes),
): Request {
  if (!req.body) return req;
  const declared = Number(req.headers.get('content-length') ?? Number.NaN);
  let received = 0;
  const reader = req.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (declared > maxBytes) {
        await reader.cancel().catch(() => {});
        controller.error(tooLarge());
        return;
      }
      const { done, value } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      received += value.byteLength;
      if (received > maxBytes) {
        await reader.cancel().catch(() => {});
        controller.error(tooLarge());
        return;
      }
      controller.enqueue(value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Request(req.url, {
    method: req.method,
    headers: req.headers,
    body,
    signal: req.signal,
    duplex: 'half',
  } as RequestInit);
}

/** The body as text, or a BodyTooLargeError once more than `maxBytes` arrived (the rest is not read). */
export async function readTextWithin(req: Request, maxBytes: number): Promise<string> {
  return limitBody(req, maxBytes).text();
}
