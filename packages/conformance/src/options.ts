/** The command line, parsed once into typed options; a bad one is a `UsageError` that names the flag. */
import { parseArgs } from 'node:util';
import { PROFILES, type ProfileName } from './profiles.ts';

export class UsageError extends Error {
  override name = 'UsageError';
}

export const USAGE = `idem-conformance <url> [options]

Sends real requests to <url> (a POST route that takes an Idempotency-Key) and reports, per check, pass or fail
with what it saw. Exit code: 0 when every required check of the profile passed, 1 when one failed, 2 on a usage
error.

How to count the route's real effect (one is required):
  --executions-url <url>     GET that answers the number of executions so far (a JSON number or {"count": n})
  --effect-pointer <ptr>     JSON Pointer into a success body that names the effect (e.g. /id): executions are
                             the distinct values seen

Requests:
  --body <json>              a valid body; every {{uuid}} becomes a fresh UUID for each new key (default {})
  --other-body <json>        a valid body that differs (same key → 422); default: --body plus a field
  --invalid-body <json>      a body the route rejects with 400 (default {})
  --business-error-body <json>
                             a body the route refuses with a business error (a stored 4xx, e.g. 402):
                             enables the check that it is stored and replayed
  --header "Name: value"     sent with every request as principal A (repeatable)
  --other-header "N: v"      principal B's headers instead of A's (enables the key-scope check)
  --no-auth                  the route has no principals: skip the 401 check
  --concurrency <n>          parallel same-key requests in the concurrency check (default 20)

Output:
  --profile <name>           ${Object.keys(PROFILES).join(' | ')} (default idem): which checks must pass
  --infer-replays            a 2xx naming an effect seen before counts as a replay even without
                             Idempotent-Replayed: true (draft-07 defines no such header: on by default there;
                             needs --effect-pointer)
  --json                     the report as JSON on stdout
`;

export interface CliOptions {
  url: string;
  executionsUrl: string | null;
  effectPointer: string | null;
  body: string;
  otherBody: string | null;
  invalidBody: string;
  businessErrorBody: string | null;
  headers: Record<string, string>;
  otherHeaders: Record<string, string> | null;
  auth: boolean;
  concurrency: number;
  profile: ProfileName;
  /** A 2xx naming an effect already seen is a replay, with or without `Idempotent-Replayed`. */
  inferReplays: boolean;
  json: boolean;
}

function headerMap(values: readonly string[], flag: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const value of values) {
    const colon = value.indexOf(':');
    if (colon < 1) throw new UsageError(`${flag} "${value}": expected "Name: value"`);
    headers[value.slice(0, colon).trim().toLowerCase()] = value.slice(colon + 1).trim();
  }
  return headers;
}

function json(value: string, flag: string): string {
  try {
    JSON.parse(value.replaceAll('{{uuid}}', '00000000-0000-4000-8000-000000000000'));
  } catch {
    throw new UsageError(`${flag}: not JSON: ${value}`);
  }
  return value;
}

function httpUrl(value: string, what: string): string {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new UsageError(`${what}: not a URL: ${value}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new UsageError(`${what}: expected an http(s) URL, got ${value}`);
  return parsed.toString();
}

export function parseCliOptions(argv: readonly string[]): CliOptions | 'help' {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  if (values.help) return 'help';
  if (positionals.length !== 1) throw new UsageError('expected exactly one <url>');
  const executionsUrl = values['executions-url'] ?? null;
  const effectPointer = values['effect-pointer'] ?? null;
  if ((executionsUrl === null) === (effectPointer === null))
    throw new UsageError(
      'give exactly one of --executions-url and --effect-pointer (how to count executions)',
    );
  if (effectPointer !== null && !effectPointer.startsWith('/'))
    throw new UsageError(`--effect-pointer "${effectPointer}": a JSON Pointer starts with /`);
  const concurrency = Number(values.concurrency ?? '20');
  if (!Number.isInteger(concurrency) || concurrency < 2 || concurrency > 500)
    throw new UsageError('--concurrency: an integer from 2 to 500');
  const profile = values.profile ?? 'idem';
  if (!(profile in PROFILES)) throw new UsageError(`--profile: one of ${Object.keys(PROFILES).join(', ')}`);
  const otherHeaders = values['other-header'] ?? [];
  const inferReplays = values['infer-replays'] ?? profile === 'draft-07';
  if (inferReplays && effectPointer === null)
    throw new UsageError(
      '--infer-replays (the draft-07 default) needs --effect-pointer: it reads the effect ids',
    );
  return {
    url: httpUrl(positionals[0] ?? '', '<url>'),
    executionsUrl: executionsUrl === null ? null : httpUrl(executionsUrl, '--executions-url'),
    effectPointer,
    body: json(values.body ?? '{}', '--body'),
    otherBody: values['other-body'] === undefined ? null : json(values['other-body'], '--other-body'),
    invalidBody: json(values['invalid-body'] ?? '{}', '--invalid-body'),
    businessErrorBody:
      values['business-error-body'] === undefined
        ? null
        : json(values['business-error-body'], '--business-error-body'),
    headers: headerMap(values.header ?? [], '--header'),
    otherHeaders: otherHeaders.length > 0 ? headerMap(otherHeaders, '--other-header') : null,
    auth: !values['no-auth'],
    concurrency,
    profile: profile as ProfileName,
    inferReplays,
    json: values.json ?? false,
  };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      'executions-url': { type: 'string' },
      'effect-pointer': { type: 'string' },
      body: { type: 'string' },
      'other-body': { type: 'string' },
      'invalid-body': { type: 'string' },
      'business-error-body': { type: 'string' },
      header: { type: 'string', multiple: true },
      'other-header': { type: 'string', multiple: true },
      'no-auth': { type: 'boolean' },
      concurrency: { type: 'string' },
      profile: { type: 'string' },
      'infer-replays': { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
