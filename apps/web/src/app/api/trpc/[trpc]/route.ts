import { TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { appRouter } from '~/server/root';
import { createTRPCContext } from '~/server/trpc';

/**
 * The largest request body the API reads. A checkout (≤ 50 lines, an email, a card token) is under 10 kB; this
 * leaves room for any batch of queries. Fix: a 1 MB body used to be read, parsed, canonicalized and hashed
 * (the Idempotency-Key fingerprint) in full, and — padding in a field the schema strips — even accepted.
 */
const MAX_BODY_BYTES = 64 * 1024;

function handler(incoming: Request) {
  const req = limitBody(incoming, MAX_BODY_BYTES);
  return fetchRequestHandler({
    endpoint: '/api/trpc',
    req,
    router: appRouter,
    createContext: ({ resHeaders, info }) =>
      createTRPCContext({ headers: req.headers, resHeaders, isBatch: info.calls.length > 1 }),
    onError({ error, path }) {
      if (error.code === 'INTERNAL_SERVER_ERROR')
        console.error(`[trpc] ${path ?? '<no path>'}:`, error.cause ?? error);
    },
  });
}

/**
 * The request with its body capped at `maxBytes`: past it (declared by Content-Length, or counted while a
 * chunked body streams in) reading fails with tRPC's PAYLOAD_TOO_LARGE, which tRPC answers as a 413 in its own
 * error shape — as its Node adapter's `maxBodySize` does. Nothing past the cap is read.
 */
function limitBody(req: Request, maxBytes: number): Request {
  if (!req.body) return req;
  const tooLarge = () =>
    new TRPCError({
      code: 'PAYLOAD_TOO_LARGE',
      message: `The request body is larger than ${maxBytes} bytes.`,
    });
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

export { handler as GET, handler as POST };
