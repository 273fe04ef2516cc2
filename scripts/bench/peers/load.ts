/**
 * The load: autocannon runs (per-response float latencies, as scripts/bench/run.ts measures them), same-key
 * bursts with fetch, and single requests. Every request is `POST {"n": <n>}` with its own Idempotency-Key
 * unless a key is given.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';

export interface LoadSample {
  latencies: number[];
  ok: number;
  /** Non-2xx answers and connection errors. */
  failed: number;
  seconds: number;
}

export function headersFor(key: string): Record<string, string> {
  return { 'content-type': 'application/json', 'idempotency-key': key };
}

export const bodyFor = (n: number) => JSON.stringify({ n });

export async function cannon(
  url: string,
  options: {
    connections: number;
    duration?: number;
    amount?: number;
    n?: number;
    nextKey?: () => string;
  },
): Promise<LoadSample> {
  const nextKey = options.nextKey ?? (() => randomUUID());
  const latencies: number[] = [];
  const instance = autocannon({
    url,
    connections: options.connections,
    ...(options.amount === undefined ? { duration: options.duration ?? 1 } : { amount: options.amount }),
    requests: [
      {
        method: 'POST',
        body: bodyFor(options.n ?? 1),
        setupRequest: (request) => ({ ...request, headers: headersFor(nextKey()) }),
      },
    ],
  });
  // The tracker emits (client, status, bytes, responseTime); @types/autocannon omits the client argument.
  (instance as unknown as NodeJS.EventEmitter).on(
    'response',
    (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
      latencies.push(responseTime);
    },
  );
  const result = await instance;
  return {
    latencies,
    ok: result['2xx'],
    failed: result.non2xx + result.errors,
    seconds: (result.finish.getTime() - result.start.getTime()) / 1000,
  };
}

export interface Answer {
  status: number | 'error';
  body: string;
}

export async function post(url: string, key: string, n: number): Promise<Answer> {
  try {
    const response = await fetch(url, { method: 'POST', headers: headersFor(key), body: bodyFor(n) });
    return { status: response.status, body: await response.text() };
  } catch (error) {
    return { status: 'error', body: error instanceof Error ? error.message : String(error) };
  }
}

export interface BurstResult {
  statuses: Record<string, number>;
  wallMs: number;
}

/** `count` requests with ONE key at once, spread round-robin over `urls` (one per server instance). */
export async function burst(urls: string[], count: number, key: string, n: number): Promise<BurstResult> {
  const statuses: Record<string, number> = {};
  const started = performance.now();
  await Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const answer = await post(urls[index % urls.length] ?? '', key, n);
      const status = String(answer.status);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }),
  );
  return { statuses, wallMs: performance.now() - started };
}
