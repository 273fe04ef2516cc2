/**
 * A bound as a timer's delay. Node runs a timer whose delay does not fit in a signed 32-bit integer (Infinity,
 * or more than about 24.8 days) after 1 ms instead — a `timeout: Infinity` meant as "no bound" would end every
 * transaction at once. Such a delay is held at the largest one a timer takes: no bound, in practice.
 */
const MAX_TIMER_DELAY_MS = 2_147_483_647;

export function timerDelay(ms: number): number {
  return Math.min(ms, MAX_TIMER_DELAY_MS);
}
