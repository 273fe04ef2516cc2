/**
 * The load driver: POST /api/trpc/checkout.placeOrder over plain node:http with keep-alive OFF (`agent: false`:
 * one connection per request, so a SIGKILLed process shows up as a reset on exactly the requests it held),
 * and clients that retry like the real client library (same key) or like a naive one (a fresh key per retry).
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export const PROCEDURE = 'checkout.placeOrder';
export const ENDPOINT = `/api/trpc/${PROCEDURE}`;

export interface CartInput {
  items: Array<{ sku: string; quantity: number }>;
  email: string;
  cardToken: string;
}

/** One HTTP attempt and what came of it. `status` 0: no response (connection refused/reset, timeout). */
export interface Attempt {
  intent: string;
  key: string;
  token: string;
  node: number;
  status: number;
  body: string;
  replayed: boolean;
  retryAfter: string | null;
  error: string | null;
  startedAt: number;
  ms: number;
}

export interface SendOptions {
  baseUrl: string;
  node: number;
  token: string;
  key: string;
  intent: string;
  input: CartInput;
  timeoutMs?: number;
  /** Gives up on the request when aborted (a client that stops waiting): status 0, the server runs on. */
  signal?: AbortSignal;
}

export function send(options: SendOptions): Promise<Attempt> {
  const started = Date.now();
  const body = JSON.stringify({ json: options.input });
  const url = new URL(ENDPOINT, options.baseUrl);
  return new Promise((resolve) => {
    let settled = false;
    const done = (partial: Pick<Attempt, 'status' | 'body' | 'replayed' | 'retryAfter' | 'error'>) => {
      if (settled) return;
      settled = true;
      resolve({
        intent: options.intent,
        key: options.key,
        token: options.token,
        node: options.node,
        startedAt: started,
        ms: Date.now() - started,
        ...partial,
      });
    };
    const request = http.request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          authorization: `Bearer ${options.token}`,
          'idempotency-key': options.key,
          connection: 'close',
        },
        timeout: options.timeoutMs ?? 60_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          done({
            status: response.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            replayed: response.headers['idempotent-replayed'] === 'true',
            retryAfter: (response.headers['retry-after'] as string | undefined) ?? null,
            error: null,
          }),
        );
        response.on('error', (error) =>
          done({ status: 0, body: '', replayed: false, retryAfter: null, error: error.message }),
        );
      },
    );
    request.on('timeout', () => request.destroy(new Error('client timeout')));
    if (options.signal?.aborted) request.destroy(new Error('client gave up'));
    options.signal?.addEventListener('abort', () => request.destroy(new Error('client gave up')), {
      once: true,
    });
    request.on('error', (error) =>
      done({ status: 0, body: '', replayed: false, retryAfter: null, error: error.message }),
    );
    request.end(body);
  });
}

export interface ClientOptions {
  /** The web processes' base URLs, or a function for the current ones (they change on restart). */
  urls: () => string[];
  token: string;
  intent: string;
  input: CartInput;
  /** The first attempt's key; `naive` clients make a fresh one for every retry. */
  key?: string;
  naive?: boolean;
  /** Which process the first attempt goes to (default: spread by a random pick). */
  firstNode?: number;
  /** Give up after this many attempts or this long (default 20 / 30 s). */
  maxAttempts?: number;
  deadlineMs?: number;
  timeoutMs?: number;
}

/**
 * A client that retries until it has a definite answer (2xx, or a 4xx other than 409): on no response, 409
 * (honouring Retry-After, capped) and 5xx, the next attempt goes to the next process. Returns every attempt.
 */
export async function runClient(options: ClientOptions): Promise<Attempt[]> {
  const attempts: Attempt[] = [];
  let key = options.key ?? randomUUID();
  const deadline = Date.now() + (options.deadlineMs ?? 30_000);
  let node = options.firstNode ?? Math.floor(Math.random() * options.urls().length);
  for (let attempt = 0; attempt < (options.maxAttempts ?? 20) && Date.now() < deadline; attempt += 1) {
    const urls = options.urls();
    const index = node % urls.length;
    const sent = await send({
      baseUrl: urls[index] ?? '',
      node: index,
      token: options.token,
      key,
      intent: options.intent,
      input: options.input,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    });
    attempts.push(sent);
    if (isDefinite(sent.status)) break;
    const waitMs =
      sent.status === 409 || sent.status === 429 ? Math.min(Number(sent.retryAfter ?? 1) * 1000, 1_000) : 150;
    await sleep(waitMs * (0.5 + Math.random()));
    node += 1;
    if (options.naive) key = randomUUID();
  }
  return attempts;
}

/** A 2xx, or a 4xx that a retry would only repeat: everything but 409 (in progress) and 429 (too many in flight). */
export function isDefinite(status: number): boolean {
  return (
    (status >= 200 && status < 300) || (status >= 400 && status < 500 && status !== 409 && status !== 429)
  );
}

/** Runs `count` clients at once, each built by `make(i)`. */
export async function storm(count: number, make: (index: number) => ClientOptions): Promise<Attempt[]> {
  const results = await Promise.all(Array.from({ length: count }, (_, index) => runClient(make(index))));
  return results.flat();
}
