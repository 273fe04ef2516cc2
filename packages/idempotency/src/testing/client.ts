/**
 * The kit's HTTP client for one target: builds its requests — tRPC (single and batched) or a plain HTTP POST
 * with a JSON body — with or without an Idempotency-Key, and keeps what the contract is about from each answer:
 * status, the idempotency headers and the ones a replay repeats, the body text exactly as received, and when it
 * was sent and received.
 */
import { IDEMPOTENCY_KEY_HEADER } from '../protocol.ts';
import type { ConformanceFetch, ConformancePrincipal, ConformanceTarget } from './target.ts';

export interface Sent {
  status: number;
  /** `Idempotent-Replayed` as received (null when absent). */
  replayed: string | null;
  /** `Retry-After` as received (null when absent). */
  retryAfter: string | null;
  contentType: string | null;
  /** `Location` and `ETag` as received: a replay repeats them. */
  location: string | null;
  etag: string | null;
  /** The body text, byte for byte as decoded: replays are compared on it. */
  body: string;
  sentAt: number;
  receivedAt: number;
}

/** Who sends: principal A (0), principal B (1), or nobody (the target's unauthenticated headers). */
export type Sender = 0 | 1 | 'anonymous';

export interface PostOptions {
  /** The Idempotency-Key header value as sent (quotes and all); null sends no header. */
  key: string | null;
  /** The input, serialized with the target's transformer. Ignored when `rawBody` is given. */
  input?: unknown;
  /** The request body exactly as given. */
  rawBody?: string;
  from?: Sender;
  /** Send the procedure twice in one tRPC batch (`a,a?batch=1`). tRPC targets only. */
  batched?: boolean;
}

export interface ConformanceClient {
  post(options: PostOptions): Promise<Sent>;
  /** The wire body of one input (the transformer's JSON). */
  wireBody(input: unknown): string;
  principal(index: 0 | 1): ConformancePrincipal;
}

export function createConformanceClient<TInput>(target: ConformanceTarget<TInput>): ConformanceClient {
  const send: ConformanceFetch = target.fetch ?? ((url, init) => globalThis.fetch(url, init));
  const serialize = (input: unknown): unknown => (target.serialize ? target.serialize(input) : input);
  const wireBody = (input: unknown): string => JSON.stringify(serialize(input)) ?? 'null';
  const endpoint = () => target.url.replace(/\/+$/, '');

  return {
    wireBody,
    principal: (index) => target.principals[index],
    async post({ key, input, rawBody, from = 0, batched = false }) {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        ...target.headers,
        ...(from === 'anonymous' ? target.unauthenticatedHeaders : target.principals[from].headers),
      };
      if (key !== null) headers[IDEMPOTENCY_KEY_HEADER] = key;
      if (batched && target.protocol === 'http') throw new Error('a plain HTTP target has no batches');
      const url =
        target.protocol === 'http'
          ? target.url
          : batched
            ? `${endpoint()}/${target.procedure},${target.procedure}?batch=1`
            : `${endpoint()}/${target.procedure}`;
      const single = rawBody ?? wireBody(input);
      const body = batched ? `{"0":${single},"1":${single}}` : single;
      const sentAt = Date.now();
      const response = await send(url, { method: 'POST', headers, body });
      const text = await response.text();
      return {
        status: response.status,
        replayed: response.headers.get('idempotent-replayed'),
        retryAfter: response.headers.get('retry-after'),
        contentType: response.headers.get('content-type'),
        location: response.headers.get('location'),
        etag: response.headers.get('etag'),
        body: text,
        sentAt,
        receivedAt: Date.now(),
      };
    },
  };
}

/** A one-line account of an answer for failure details. */
export function describeSent(sent: Sent): string {
  const headers = [
    sent.replayed === null ? '' : `Idempotent-Replayed: ${sent.replayed}`,
    sent.retryAfter === null ? '' : `Retry-After: ${sent.retryAfter}`,
  ].filter(Boolean);
  const body = sent.body.length > 160 ? `${sent.body.slice(0, 160)}…` : sent.body;
  return `${sent.status}${headers.length ? ` (${headers.join(', ')})` : ''} ${body}`;
}

/** A 2xx. */
export const isSuccess = (sent: Sent) => sent.status >= 200 && sent.status < 300;
/** A success that ran the procedure: no Idempotent-Replayed. */
export const isFresh = (sent: Sent) => isSuccess(sent) && sent.replayed === null;
/** A replay: `Idempotent-Replayed: true`. */
export const isReplay = (sent: Sent) => sent.replayed === 'true';
/** A `Retry-After` as delay-seconds (RFC 9110 §10.2.3), the form a 409 and a 429 must carry it in. */
export const hasRetryAfterSeconds = (sent: Sent) => /^\d+$/.test(sent.retryAfter ?? '');
/** A 409 with a valid `Retry-After`. */
export const isConflict = (sent: Sent) => sent.status === 409 && hasRetryAfterSeconds(sent);
