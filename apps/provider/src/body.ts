/**
 * Request body reading: a hard size limit (a simulated card API has no business buffering megabytes) and the two
 * encodings Stripe clients use, JSON and application/x-www-form-urlencoded.
 */
import type { IncomingMessage } from 'node:http';
import type { RequestBody } from './charges.ts';
import { ApiError, invalidRequest } from './errors.ts';

export const BODY_LIMIT_BYTES = 1024 * 1024;

function tooLarge(limit: number): ApiError {
  // Connection: close — the rest of an oversized upload is not worth reading just to keep the socket alive.
  return new ApiError(
    413,
    'invalid_request_error',
    `Request body too large (limit ${limit} bytes).`,
    {},
    { Connection: 'close' },
  );
}

function readRaw(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  // Refuse early when the client announces the size; chunked bodies are counted as they arrive.
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));

  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        // Stop collecting but do not destroy the stream: that would kill the socket before the 413 is sent.
        cleanup();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onClose = (): void => {
      cleanup();
      reject(new Error('client closed the connection before the request body was complete'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeUtf8(raw: Buffer): string {
  try {
    return utf8.decode(raw);
  } catch {
    throw invalidRequest('The request body is not valid UTF-8.');
  }
}

/** Reads and decodes the body. A missing Content-Type is treated as JSON, the common case for hand-written curl. */
export async function readRequestBody(req: IncomingMessage, limit = BODY_LIMIT_BYTES): Promise<RequestBody> {
  const contentType = req.headers['content-type'] ?? 'application/json';
  const [mediaType = '', ...parameters] = contentType.split(';').map((part) => part.trim().toLowerCase());
  const charset = parameters
    .find((p) => p.startsWith('charset='))
    ?.slice('charset='.length)
    .replace(/"/g, '');
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new ApiError(415, 'invalid_request_error', `Unsupported charset: ${charset}. Use utf-8.`);
  }
  if (mediaType !== 'application/json' && mediaType !== 'application/x-www-form-urlencoded') {
    throw new ApiError(
      415,
      'invalid_request_error',
      `Unsupported Content-Type: ${mediaType}. Use application/json or application/x-www-form-urlencoded.`,
    );
  }

  const text = decodeUtf8(await readRaw(req, limit));

  if (mediaType === 'application/x-www-form-urlencoded') {
    const value: Record<string, string> = {};
    for (const [key, item] of new URLSearchParams(text)) {
      if (Object.hasOwn(value, key))
        throw invalidRequest(`Parameter given more than once: ${key}`, { param: key });
      value[key] = item;
    }
    return { kind: 'form', value };
  }

  if (text.trim() === '') return { kind: 'json', value: {} };
  try {
    return { kind: 'json', value: JSON.parse(text) as unknown };
  } catch {
    throw invalidRequest('The request body is not valid JSON.');
  }
}
