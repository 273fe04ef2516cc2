#!/usr/bin/env node
/** `idem-conformance <url> [options]`: see options.ts for the flags. */
import { parseCliOptions, USAGE, UsageError } from './options.ts';
import { formatReport } from './report.ts';
import { runConformanceCli } from './run.ts';

try {
  const options = parseCliOptions(process.argv.slice(2));
  if (options === 'help') {
    process.stdout.write(USAGE);
  } else {
    const report = await runConformanceCli(options);
    process.stdout.write(`${options.json ? JSON.stringify(report, null, 2) : formatReport(report)}\n`);
    process.exitCode = report.passed ? 0 : 1;
  }
} catch (error) {
  if (!(error instanceof UsageError)) throw error;
  process.stderr.write(`idem-conformance: ${error.message}\n\n${USAGE}`);
  process.exitCode = 2;
}
