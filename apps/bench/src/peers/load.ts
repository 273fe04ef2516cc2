/**
 * The load: autocannon runs (per-response float latencies, as apps/bench/src/run.ts measures them), same-key
 * bursts with fetch, and single requests. Every request is `POST {"n": <n>}` with its own Idempotency-Key
 * unless a key is given.
 */
import { performance } from 'node:perf_hooks';
import { type LoadSample, cannon as runCannon } from '../cannon.ts';

export type { LoadSample };

export function headersFor(key: string): Record<string, string> {
  return { 'content-type': 'application/json', 'idempotency-key': key };
}

export const bodyFor = (n: number) => JSON.stringify({ n });

export function cannon(
  url: string,
  options: { connections: number; duration?: number; amount?: number; n?: number; nextKey?: () => string },
): Promise<LoadSample> {
  const { n, ...rest } = options;
  return runCannon(url, { ...rest, body: bodyFor(n ?? 1), headers: headersFor });
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
