/** What every section of `pnpm bench` is given, and what a section returns when it did not run. */
import type { BenchOptions } from '../options.ts';
import type { Progress } from '../progress.ts';
import type { Stack } from '../stack.ts';

export interface SectionContext {
  options: BenchOptions;
  stack: Stack;
  progress: Progress;
}

/** A section that did not run, and why: recorded as such in docs/bench-results.json. */
export interface Skipped {
  skipped: string;
}

/** A figure measured in one run, and the answers of that run that were not 2xx (or no answer at all). */
export interface Measurement<T> {
  value: T;
  failures: number;
}
