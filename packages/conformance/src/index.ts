/** @idem/conformance — the command `idem-conformance`, and its parts for use from code. */
export { type CommandResult, runConformanceCommand } from './command.ts';
export { type CliOptions, parseCliOptions, UsageError } from './options.ts';
export { type CheckId, HttpCheckId, isRequired, PROFILES, type ProfileName } from './profiles.ts';
export { type CliReport, formatReport, type ReportRow } from './report.ts';
export { runConformanceCli } from './run.ts';
