/**
 * Protected and unprotected measured back to back, in a run's order (requests.ts `alternate`): how P1, P2 and the
 * checkout path take each run's pair of figures.
 */
import type { BenchOptions } from '../options.ts';
import type { Measured } from '../requests.ts';
import type { Measurement } from './context.ts';

/**
 * How runs.ts takes P1's and P2's pair in run `run` (from 0, for the log lines), the procedures in `order`.
 */
export type MeasurePair = (
  url: string,
  options: BenchOptions,
  run: number,
  order: readonly Measured[],
) => Promise<Measurement<Record<Measured, number>>>;

/** One procedure's figure in a run, and its answers that were not 2xx (or no answer at all). */
export interface ProcedureMeasurement {
  value: number;
  failed: number;
}

/** `measure` for each procedure in `order`: the figure of each, and the failures of both. */
export async function measureBoth(
  order: readonly Measured[],
  measure: (procedure: Measured) => Promise<ProcedureMeasurement>,
): Promise<Measurement<Record<Measured, number>>> {
  const value = { protected: Number.NaN, unprotected: Number.NaN };
  let failures = 0;
  for (const procedure of order) {
    const one = await measure(procedure);
    failures += one.failed;
    value[procedure] = one.value;
  }
  return { value, failures };
}
