/**
 * The realistic path: `checkout.placeOrder` in external mode (claim, price and reserve stock, charge the provider
 * over loopback HTTP, record the payment, complete) against the same service without the layer
 * (`bench.placeOrderUnprotected`), 1 connection, p50 per run, which goes first alternating from run to run. Stock
 * is topped up first so that no order is refused. The orders it pays for are the job dedupe section's input.
 */

import { cannon } from '../cannon.ts';
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { alternate, type Measured, requestHeaders } from '../requests.ts';
import { median } from '../stats.ts';
import { type Figure, figure, signedMs } from '../summary.ts';
import { measureBoth } from './both-procedures.ts';
import type { SectionContext } from './context.ts';

export const name = 'checkout placeOrder';

export function plannedSeconds(options: BenchOptions): number {
  return 2 + options.runs * 2 * options.orderSeconds;
}

export interface CheckoutPath {
  protectedP50: number;
  unprotectedP50: number;
  /** Median of the per-run ratios. */
  ratio: number;
  /** Median of the per-run differences, ms. */
  addedMs: number;
  runs: Array<{ protectedP50: number; unprotectedP50: number; failed: number }>;
}

const PATHS: Record<Measured, string> = {
  protected: '/api/trpc/checkout.placeOrder',
  unprotected: '/api/trpc/bench.placeOrderUnprotected',
};

const ORDER = JSON.stringify({
  json: { items: [{ sku: 'MUG-STONE', quantity: 1 }], email: 'alice@example.com', cardToken: 'tok_visa' },
});

export async function run({ options, stack, progress }: SectionContext): Promise<CheckoutPath> {
  await stack.client.query('update products set stock = 1000000000');
  const time = (procedure: Measured, duration: number) =>
    cannon(stack.url, {
      connections: 1,
      duration,
      path: PATHS[procedure],
      body: ORDER,
      headers: requestHeaders,
    });
  // A warm-up: one second of each, not timed.
  for (const procedure of ['protected', 'unprotected'] as const) await time(procedure, 1);
  const runs: CheckoutPath['runs'] = [];
  for (let index = 0; index < options.runs; index += 1) {
    progress.run(index + 1, options.runs);
    const { value: p50, failures: failed } = await measureBoth(alternate(index), async (procedure) => {
      const sample = await time(procedure, options.orderSeconds);
      return { value: median(sample.latencies), failed: sample.failed };
    });
    runs.push({ protectedP50: p50.protected, unprotectedP50: p50.unprotected, failed });
    log(
      `  placeOrder p50: with the layer ${p50.protected.toFixed(2)} ms, without ${p50.unprotected.toFixed(2)} ms (${failed} failed)`,
    );
  }
  return {
    protectedP50: median(runs.map((r) => r.protectedP50)),
    unprotectedP50: median(runs.map((r) => r.unprotectedP50)),
    ratio: median(runs.map((r) => r.protectedP50 / r.unprotectedP50)),
    addedMs: median(runs.map((r) => r.protectedP50 - r.unprotectedP50)),
    runs,
  };
}

export function figures(checkout: CheckoutPath, options: BenchOptions): Figure[] {
  return [
    figure({
      id: 'checkout',
      label: 'checkout placeOrder p50, with / without the layer',
      runs: checkout.runs.map((r) => r.protectedP50 / r.unprotectedP50),
      detail: `${checkout.protectedP50.toFixed(2)} / ${checkout.unprotectedP50.toFixed(2)} ms, ${signedMs(checkout.addedMs)} (external mode, provider on loopback, 1 connection, ${options.orderSeconds} s each)`,
    }),
  ];
}
