/**
 * TEST-ONLY switches, for the crash tests and their control runs. Read from the environment by env.ts, and
 * honoured only when NODE_ENV !== 'production' or WORKER_TEST_HOOKS=1; the worker logs a warning whenever one
 * is active. None of them has any use in a real deployment.
 */
export interface WorkerTestHooks {
  /** WORKER_TEST_PAUSE_AFTER_SHIPMENT_MS: sleep after the shipment commits, before the receipt (a kill window). */
  pauseAfterShipmentMs: number;
  /** WORKER_TEST_PAUSE_AFTER_RECEIPT_MS: sleep after the receipt, before the job is acknowledged. */
  pauseAfterReceiptMs: number;
  /**
   * WORKER_TEST_DISABLE_DEDUPE=1: the receipt is written under a per-delivery kind `receipt:<jobId>:<attempt>`
   * instead of `receipt`, so the unique (order_id, kind) no longer absorbs a redelivered job: the control run
   * shows the duplicate email that the constraint otherwise prevents.
   */
  disableDedupe: boolean;
}

export const NO_TEST_HOOKS: WorkerTestHooks = Object.freeze({
  pauseAfterShipmentMs: 0,
  pauseAfterReceiptMs: 0,
  disableDedupe: false,
});

export function activeHooks(hooks: WorkerTestHooks): string[] {
  const active: string[] = [];
  if (hooks.pauseAfterShipmentMs > 0) active.push(`pause ${hooks.pauseAfterShipmentMs} ms after shipment`);
  if (hooks.pauseAfterReceiptMs > 0) active.push(`pause ${hooks.pauseAfterReceiptMs} ms after receipt`);
  if (hooks.disableDedupe) active.push('receipt dedupe DISABLED (per-delivery kind)');
  return active;
}
