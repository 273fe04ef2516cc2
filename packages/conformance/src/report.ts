/** One report for the kit's checks and this command's own, judged by a profile; as a table or as JSON. */
import type { ConformanceReport } from '@idem/idempotency/testing';
import type { HttpCheckResult } from './http-checks.ts';
import { type CheckId, isRequired, PROFILES, type ProfileName } from './profiles.ts';

export type RowResult = 'pass' | 'fail' | 'not covered';

export interface ReportRow {
  id: CheckId;
  title: string;
  result: RowResult;
  /** Whether the profile requires it: a failed advisory row does not fail the run. */
  required: boolean;
  detail: string;
}

export interface CliReport {
  url: string;
  profile: ProfileName;
  /** Replays were told by a repeated effect id, not (only) by `Idempotent-Replayed: true`. */
  inferredReplays: boolean;
  passed: boolean;
  rows: ReportRow[];
}

export function buildReport(
  url: string,
  profile: ProfileName,
  inferredReplays: boolean,
  kit: ConformanceReport,
  http: readonly HttpCheckResult[],
  skipped: ReadonlyArray<{ id: CheckId; title: string; reason: string }>,
): CliReport {
  const row = (id: CheckId, title: string, result: RowResult, detail: string): ReportRow => ({
    id,
    title,
    result,
    required: isRequired(profile, id),
    detail,
  });
  const rows = [
    ...kit.results.map((check) => row(check.id, check.title, check.passed ? 'pass' : 'fail', check.detail)),
    ...http.map((check) => row(check.id, check.title, check.passed ? 'pass' : 'fail', check.detail)),
    ...[...kit.notCovered, ...skipped].map((check) =>
      row(check.id, check.title, 'not covered', check.reason),
    ),
  ];
  const passed = rows.every((each) => !each.required || each.result !== 'fail');
  return { url, profile, inferredReplays, passed, rows };
}

export function formatReport(report: CliReport): string {
  const width = Math.max(...report.rows.map((row) => row.id.length));
  const mark: Record<RowResult, string> = { pass: 'pass', fail: 'FAIL', 'not covered': '----' };
  const lines = [
    `idem-conformance ${report.url} (profile ${report.profile}: ${PROFILES[report.profile].summary})`,
    ...(report.inferredReplays
      ? [
          'replays: a 2xx that names an effect already seen counts as one, with or without Idempotent-Replayed',
        ]
      : []),
    '',
    ...report.rows.map(
      (row) =>
        `${mark[row.result]}  ${row.id.padEnd(width)}  ${row.required ? 'required' : 'advice  '}  ${row.detail.replace(/\n/g, ' ')}`,
    ),
    '',
    report.passed ? 'PASSED: every required check passed' : 'FAILED: a required check failed',
  ];
  return lines.join('\n');
}
