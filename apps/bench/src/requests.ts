/**
 * Requests to the test server's `bench.*` procedures (apps/web/test/server/bench-router.ts), as the demo user
 * Alice (bearer token) with an Idempotency-Key per request unless the caller shares one: timed runs through
 * autocannon (cannon.ts), bursts sent all at once, and the rows the procedures wrote (`bench_effects`).
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { type LoadSample, cannon as runCannon } from './cannon.ts';
import { demoUsers } from './repository.ts';

/** The same handler body in one interactive transaction, with and without the idempotency layer. */
export type Measured = 'protected' | 'unprotected';
/** `noop`: the same route with no database work of its own: the floor under P3's replay and P5's burst. */
export type Procedure = Measured | 'noop';

const TOKEN = demoUsers[0].token;

export function requestHeaders(key: string): Record<string, string> {
  return { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, 'idempotency-key': key };
}

/** The procedures' input; `n` is written into the `bench_effects` row, so that a section can count its own. */
export const body = (n: number) => JSON.stringify({ json: { n } });

/**
 * Protected and unprotected in the order for run (or round) `run`: ABAB…, so that neither always runs on the
 * warmer (or noisier) machine.
 */
export function alternate(run: number): Measured[] {
  return run % 2 === 0 ? ['protected', 'unprotected'] : ['unprotected', 'protected'];
}

/** One autocannon run against `bench.<procedure>`. */
export function cannon(
  url: string,
  procedure: Procedure,
  options: { connections: number; duration?: number; amount?: number; nextKey?: () => string; n?: number },
): Promise<LoadSample> {
  const { n, ...rest } = options;
  return runCannon(url, {
    ...rest,
    path: `/api/trpc/bench.${procedure}`,
    body: body(n ?? 1),
    headers: requestHeaders,
  });
}

/**
 * `size` requests to `bench.<procedure>` at once, keyed by `keyOf()`; counts each answer's status (or `error`)
 * into `statuses`. Resolves with the wall time until the last answer, in ms.
 */
export async function burst(
  url: string,
  procedure: Procedure,
  options: { size: number; keyOf: () => string; n: number; statuses?: Record<string, number> },
): Promise<number> {
  const statuses = options.statuses ?? {};
  const started = performance.now();
  await Promise.all(
    Array.from({ length: options.size }, async () => {
      const response = await fetch(`${url}/api/trpc/bench.${procedure}`, {
        method: 'POST',
        headers: requestHeaders(options.keyOf()),
        body: body(options.n),
      }).catch(() => undefined);
      const status = response ? String(response.status) : 'error';
      await response?.arrayBuffer();
      statuses[status] = (statuses[status] ?? 0) + 1;
    }),
  );
  return performance.now() - started;
}

/** How many answers of a burst were not 200 (errors included). */
export const notOk = (statuses: Record<string, number>) =>
  Object.entries(statuses).reduce((sum, [status, count]) => sum + (status === '200' ? 0 : count), 0);

/** Rows in `bench_effects`, all of them or those a request with this `n` wrote. */
export async function countEffects(client: pg.Client, n?: number): Promise<number> {
  const { rows } = await client.query<{ c: number }>(
    n === undefined
      ? 'select count(*)::int as c from bench_effects'
      : 'select count(*)::int as c from bench_effects where n = $1',
    n === undefined ? [] : [n],
  );
  return rows[0]?.c ?? 0;
}
