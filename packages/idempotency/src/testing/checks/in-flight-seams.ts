/**
 * How the checks about overlapping requests keep requests in flight, through one of the target's two seams: its
 * gate (`withHeldExecutions`: executions stop there until the check lets them go, so the check waits on events)
 * or, failing that, its latency seam (`withSlowExecution`: executions take a while, so the check waits on the
 * clock).
 */
import { type CheckContext, fail, recordsOf, sleep } from '../check.ts';
import type { ExecutionGate } from '../gate.ts';
import type { ConformanceTarget } from '../target.ts';

/** Whether the target offers either seam. */
export const canKeepInFlight = <TInput>(target: ConformanceTarget<TInput>) =>
  Boolean(target.withHeldExecutions || target.withSlowExecution);

/** One overlap of requests, written for each seam. */
export interface InFlightRun<T> {
  /** Inside `withHeldExecutions`, with its gate. */
  held(gate: ExecutionGate): Promise<T>;
  /** Inside `withSlowExecution`. */
  slowed(): Promise<T>;
}

/** Runs `run` inside the target's gate if it has one (preferred), else inside its latency seam. */
export function whileInFlight<TInput, T>(target: ConformanceTarget<TInput>, run: InFlightRun<T>): Promise<T> {
  if (target.withHeldExecutions) return target.withHeldExecutions(run.held);
  if (target.withSlowExecution) return target.withSlowExecution(run.slowed);
  return fail('no withHeldExecutions or withSlowExecution');
}

/** How long requests may take to reach the gate: far beyond any machine, short of a runner's test timeout. */
const REACH_TIMEOUT_MS = 30_000;

/** Waits until `count` executions wait at the gate; fails (and lets them go) if they never get there. */
export async function reachedInTime(gate: ExecutionGate, count: number, what: string) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), REACH_TIMEOUT_MS);
  });
  const reached = await Promise.race([gate.reached(count).then(() => true), timedOut]);
  clearTimeout(timer);
  if (!reached) {
    await gate.release();
    fail(`${what} did not reach withHeldExecutions' gate within ${REACH_TIMEOUT_MS / 1000} s`);
  }
}

/**
 * Under the latency seam, waits until the store holds every key, i.e. each request has claimed its key and is
 * in flight (without a store, for the configured settle time).
 */
export async function waitUntilClaimed<TInput>(context: CheckContext<TInput>, keys: string[]) {
  const records = recordsOf(context);
  if (!records) {
    await sleep(context.options.capSettleMs);
    return;
  }
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = await Promise.all(keys.map((key) => records.find(key)));
    if (found.every((record) => record !== null)) return;
    if (Date.now() > deadline)
      fail(`only ${found.filter(Boolean).length} of ${keys.length} keys were claimed after 10 s`);
    await sleep(25);
  }
}

/**
 * Marks a promise that is awaited later as handled now, so that a failure while the check does something else
 * first is not reported as an unhandled rejection; awaiting it still throws.
 */
export function inBackground<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}
