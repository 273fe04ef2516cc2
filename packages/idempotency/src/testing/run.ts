/** Runs the conformance checks against a target, one after another, and reports each one. */
import {
  type CheckContext,
  type ConformanceCheck,
  type ConformanceCheckId,
  ConformanceFailure,
} from './check.ts';
import { conformanceChecks } from './checks/index.ts';
import { createConformanceClient } from './client.ts';
import { type ConformanceOptions, type ConformanceTarget, resolveConformanceOptions } from './target.ts';

export interface ConformanceCheckResult {
  id: ConformanceCheckId;
  title: string;
  passed: boolean;
  /** What was seen: a summary when it passed, what went wrong when it failed. */
  detail: string;
  durationMs: number;
}

export interface ConformanceReport {
  procedure: string;
  /** True when every check that ran passed. */
  passed: boolean;
  results: ConformanceCheckResult[];
  /** Checks that need a capability the target does not offer, and which one. */
  notCovered: Array<{ id: ConformanceCheckId; title: string; reason: string }>;
}

export interface RunConformanceOptions extends ConformanceOptions {
  /** Run only these checks (default: every check the target supports). */
  only?: readonly ConformanceCheckId[];
}

/** The checks that apply to `target`, and the ones it cannot run with the reason. */
export function planConformance<TInput>(
  target: ConformanceTarget<TInput>,
  only?: readonly ConformanceCheckId[],
): { checks: ConformanceCheck[]; notCovered: ConformanceReport['notCovered'] } {
  const selected = conformanceChecks.filter((check) => !only || only.includes(check.id));
  const checks: ConformanceCheck[] = [];
  const notCovered: ConformanceReport['notCovered'] = [];
  for (const check of selected) {
    const reason = check.unavailableReason(target);
    if (reason === null) checks.push(check);
    else notCovered.push({ id: check.id, title: check.title, reason });
  }
  return { checks, notCovered };
}

/** Runs one check; never throws: a failure, or any error (a refused connection), is its result. */
export async function runConformanceCheck<TInput>(
  check: ConformanceCheck,
  target: ConformanceTarget<TInput>,
  options: ConformanceOptions = {},
): Promise<ConformanceCheckResult> {
  const started = performance.now();
  const result = (passed: boolean, detail: string): ConformanceCheckResult => ({
    id: check.id,
    title: check.title,
    passed,
    detail,
    durationMs: Math.round(performance.now() - started),
  });
  try {
    const baseline = await target.executions();
    const context: CheckContext<TInput> = {
      target,
      client: createConformanceClient(target),
      options: resolveConformanceOptions(options),
      newKey: () => globalThis.crypto.randomUUID(),
      executionsSinceStart: async () => (await target.executions()) - baseline,
    };
    return result(true, await check.run(context));
  } catch (error) {
    if (error instanceof ConformanceFailure) return result(false, error.message);
    return result(
      false,
      `the check could not run: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/**
 * Runs every applicable check against the target (sequentially: each counts executions as a difference, so
 * they must not overlap) and returns the report. Nothing is thrown for a failing check.
 */
export async function runIdempotencyConformance<TInput>(
  target: ConformanceTarget<TInput>,
  options: RunConformanceOptions = {},
): Promise<ConformanceReport> {
  const { checks, notCovered } = planConformance(target, options.only);
  const results: ConformanceCheckResult[] = [];
  for (const check of checks) results.push(await runConformanceCheck(check, target, options));
  return {
    procedure: target.procedure,
    passed: results.every((result) => result.passed),
    results,
    notCovered,
  };
}

/** The report as plain text, one line per check, for logs and CI output. */
export function formatConformanceReport(report: ConformanceReport): string {
  const lines = [`Idempotency conformance of ${report.procedure}: ${report.passed ? 'PASSED' : 'FAILED'}`];
  for (const result of report.results) {
    const mark = result.passed ? 'pass' : 'FAIL';
    lines.push(
      `  ${mark}  ${result.id} (${result.durationMs} ms): ${result.detail.replace(/\n/g, '\n        ')}`,
    );
  }
  for (const skipped of report.notCovered)
    lines.push(`  ----  ${skipped.id}: not covered — ${skipped.reason}`);
  return lines.join('\n');
}
