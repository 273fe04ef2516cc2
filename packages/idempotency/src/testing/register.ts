/**
 * Registers each conformance check as one test of the caller's test runner (vitest's or jest's describe/it, or
 * anything with their shape), so the package never imports a test runner.
 */
import type { ConformanceCheckId } from './check.ts';
import { type ConformanceCheckResult, planConformance, runConformanceCheck } from './run.ts';
import type { ConformanceOptions, ConformanceTarget } from './target.ts';

export interface TestRegistrar {
  describe(name: string, body: () => void): unknown;
  it(name: string, body: () => Promise<void>, timeoutMs?: number): unknown;
}

export interface RegisterConformanceOptions extends ConformanceOptions {
  only?: readonly ConformanceCheckId[];
  /** Per-test timeout passed to `it`. Default 60 000 ms. */
  timeoutMs?: number;
  /** The describe block's name. Default `idempotency conformance: <procedure>`. */
  name?: string;
  /** Called with every check's result, passed or not (e.g. to log what each check saw). */
  onResult?(result: ConformanceCheckResult): void;
}

/**
 * One `describe` with one `it` per applicable check; a failing check throws its detail. Which checks apply is
 * decided now, from the target's optional capabilities (functions, `inFlightCap`); values such as `url` are read
 * when each test runs, so they may be getters filled in by a `beforeAll`.
 */
export function registerIdempotencyConformance<TInput>(
  target: ConformanceTarget<TInput>,
  { describe, it }: TestRegistrar,
  options: RegisterConformanceOptions = {},
): void {
  const { checks } = planConformance(target, options.only);
  describe(options.name ?? `idempotency conformance: ${target.procedure}`, () => {
    for (const check of checks) {
      it(
        `${check.id}: ${check.title}`,
        async () => {
          const result = await runConformanceCheck(check, target, options);
          options.onResult?.(result);
          if (!result.passed) throw new Error(`${check.id}: ${result.detail}`);
        },
        options.timeoutMs ?? 60_000,
      );
    }
  });
}
