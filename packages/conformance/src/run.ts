/** Runs every check against the options' target and judges it by the profile. */
import { runIdempotencyConformance } from '@idem/idempotency/testing';
import { runHttpChecks } from './http-checks.ts';
import type { CliOptions } from './options.ts';
import type { CheckId } from './profiles.ts';
import { buildReport, type CliReport } from './report.ts';
import { cliTarget } from './target.ts';

/** Why a check the kit cannot run here is not covered, in this command's terms. */
const BLACK_BOX_REASONS: Partial<Record<CheckId, string>> = {
  'stored-error': 'needs --business-error-body (a body the route refuses with a stored 4xx)',
  'transient-failure': 'a black box cannot make the route fail with a 5xx on demand',
  'in-flight': 'a black box cannot hold an execution in flight on demand',
  'in-flight-cap': 'a black box cannot hold executions in flight on demand',
  batched: 'a plain HTTP route has no batches',
};

export async function runConformanceCli(options: CliOptions): Promise<CliReport> {
  const target = cliTarget(options);
  const skipped: Array<{ id: CheckId; title: string; reason: string }> = [];
  if (options.otherHeaders === null)
    skipped.push({ id: 'scope', title: 'a key is scoped to its principal', reason: 'needs --other-header' });
  if (!options.auth)
    skipped.push({
      id: 'no-principal',
      title: 'a request without a principal is refused',
      reason: '--no-auth',
    });
  const skippedIds = new Set(skipped.map((each) => each.id));
  const kit = await runIdempotencyConformance(target, { concurrency: options.concurrency });
  const kept = {
    ...kit,
    results: kit.results.filter((result) => !skippedIds.has(result.id)),
    notCovered: kit.notCovered
      .filter((check) => !skippedIds.has(check.id))
      .map((check) => ({ ...check, reason: BLACK_BOX_REASONS[check.id] ?? check.reason })),
  };
  const http = await runHttpChecks(target);
  return buildReport(options.url, options.profile, options.inferReplays, kept, http, skipped);
}
