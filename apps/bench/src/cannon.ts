/**
 * One autocannon run of keyed POSTs, shared by `pnpm bench` (run.ts) and its peers section: each request gets its
 * own Idempotency-Key (`nextKey`, a fresh UUID by default), and latencies come from the per-response event
 * (float ms) rather than autocannon's integer histogram.
 */
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';

export interface LoadSample {
  latencies: number[];
  ok: number;
  /** Non-2xx answers and connection errors. */
  failed: number;
  seconds: number;
}

export interface CannonOptions {
  connections: number;
  /** Seconds (default 1), unless `amount` requests are asked for. */
  duration?: number;
  amount?: number;
  nextKey?: () => string;
  path?: string;
  body: string;
  headers: (key: string) => Record<string, string>;
}

/**
 * A `nextKey` that hands out `keys` in their order, then from the first again: a run of `keys.length` requests
 * sends each key once, and a second such run replays them.
 */
export function cycleThrough(keys: readonly string[]): () => string {
  let next = 0;
  return () => keys[next++ % keys.length] ?? randomUUID();
}

export async function cannon(url: string, options: CannonOptions): Promise<LoadSample> {
  const nextKey = options.nextKey ?? (() => randomUUID());
  const latencies: number[] = [];
  const instance = autocannon({
    url,
    connections: options.connections,
    ...(options.amount === undefined ? { duration: options.duration ?? 1 } : { amount: options.amount }),
    requests: [
      {
        method: 'POST',
        ...(options.path === undefined ? {} : { path: options.path }),
        body: options.body,
        setupRequest: (request) => ({ ...request, headers: options.headers(nextKey()) }),
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
