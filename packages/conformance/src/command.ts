/** The command as a child process, for tests and scripts that want it exactly as a user runs it. */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { CliReport } from './report.ts';

const bin = path.resolve(import.meta.dirname, '../bin/idem-conformance.mjs');

export interface CommandResult {
  exitCode: number;
  /** The report, when the command printed one with `--json`. */
  report: CliReport | null;
  stdout: string;
  stderr: string;
}

export async function runConformanceCommand(args: readonly string[]): Promise<CommandResult> {
  const result = await promisify(execFile)(process.execPath, [bin, ...args], {
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
  const printed = result.stdout.trim();
  return {
    exitCode: result.code,
    report: printed.startsWith('{') ? (JSON.parse(printed) as CliReport) : null,
    stdout: result.stdout,
    stderr: result.stderr,
  };
}
