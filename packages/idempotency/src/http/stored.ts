/**
 * Between an HTTP response and what the store keeps of it: which responses are stored (a success, or a
 * business error named in `storedErrorCodes`), which headers travel with them, and the replay of one —
 * status, those headers and the body byte for byte, marked `Idempotent-Replayed: true`.
 */
import type { ResolvedOptions } from '../core/config.ts';
import type { StoredResponse } from '../core/record.ts';
import { IDEMPOTENT_REPLAYED_HEADER } from '../protocol.ts';
import type { HttpAnswer } from './answer.ts';

/** The headers a replay repeats (with the status and the body); every other header is the first answer's own. */
export const DEFAULT_REPLAYED_HEADERS = ['content-type', 'location', 'etag'] as const;

/**
 * An error status's name in `storedErrorCodes`: the name tRPC gives the same status (so one option means the
 * same on both adapters: `PAYMENT_REQUIRED` is 402 everywhere), or `HTTP_<status>` for one tRPC has no name for.
 */
const codeByStatus: Readonly<Record<number, string>> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  402: 'PAYMENT_REQUIRED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_SUPPORTED',
  408: 'TIMEOUT',
  409: 'CONFLICT',
  412: 'PRECONDITION_FAILED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'UNPROCESSABLE_CONTENT',
  428: 'PRECONDITION_REQUIRED',
  429: 'TOO_MANY_REQUESTS',
  499: 'CLIENT_CLOSED_REQUEST',
  500: 'INTERNAL_SERVER_ERROR',
  501: 'NOT_IMPLEMENTED',
  502: 'BAD_GATEWAY',
  503: 'SERVICE_UNAVAILABLE',
  504: 'GATEWAY_TIMEOUT',
};

export function errorCodeOfStatus(status: number): string {
  return codeByStatus[status] ?? `HTTP_${status}`;
}

/**
 * What to store for the handler's answer, or null to release the key (a retry runs again). Below 400 it is the
 * outcome (stored, and in transactional mode committed with the handler's writes). A 4xx whose name is in
 * `storedErrorCodes` is a business outcome: stored, its writes rolled back. Anything else — a validation 400, a
 * 5xx — is not an outcome a retry would only repeat.
 */
export function responseToStore(
  answer: HttpAnswer,
  options: ResolvedOptions,
  replayedHeaders: readonly string[],
): StoredResponse | null {
  const kept = keptHeaders(answer, replayedHeaders);
  const body = encodeBody(answer.body);
  if (answer.status < 400) return { kind: 'output', httpStatus: answer.status, ...body, headers: kept };
  const code = errorCodeOfStatus(answer.status);
  if (answer.status >= 500 || !options.storedErrorCodes.includes(code)) return null;
  return {
    kind: 'error',
    httpStatus: answer.status,
    code,
    message: `HTTP ${answer.status}`,
    ...body,
    headers: kept,
  };
}

/**
 * The replay of a stored response. A record without a body (written by the tRPC adapter under the same
 * procedure name) replays as its status and the JSON it stored.
 */
export function replayAnswerOf(stored: StoredResponse): HttpAnswer {
  const headers: Array<[string, string]> = Object.entries(stored.headers ?? {});
  headers.push([IDEMPOTENT_REPLAYED_HEADER, 'true']);
  const body =
    stored.body === undefined
      ? new TextEncoder().encode(JSON.stringify({ code: stored.kind === 'error' ? stored.code : undefined }))
      : decodeBody(stored.body, stored.bodyEncoding);
  return { status: stored.httpStatus, headers, body };
}

function keptHeaders(answer: HttpAnswer, replayedHeaders: readonly string[]): { [name: string]: string } {
  const kept: { [name: string]: string } = {};
  for (const [name, value] of answer.headers) {
    const lower = name.toLowerCase();
    if (!replayedHeaders.includes(lower)) continue;
    kept[lower] = lower in kept ? `${kept[lower]}, ${value}` : value;
  }
  return kept;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Text when the bytes are UTF-8 (readable in the table), base64 otherwise: either way the same bytes back. */
function encodeBody(bytes: Uint8Array): { body: string; bodyEncoding?: 'base64' } {
  try {
    return { body: strictUtf8.decode(bytes) };
  } catch {
    return { body: Buffer.from(bytes).toString('base64'), bodyEncoding: 'base64' };
  }
}

function decodeBody(body: string, encoding: 'base64' | undefined): Uint8Array<ArrayBuffer> {
  return encoding === 'base64' ? new Uint8Array(Buffer.from(body, 'base64')) : new TextEncoder().encode(body);
}
