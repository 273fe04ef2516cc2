/**
 * Support for the hostile-input suite: session cookies signed the way the app signs them (or not quite),
 * webhook signatures, response parsing that tolerates any body, the checks every case shares, and the summary
 * table printed at the end.
 */
import { createHmac } from 'node:crypto';
import { SignJWT } from 'jose';
import { rawHttpRequest } from './loopback-http.ts';

export interface Sent {
  status: number;
  header(name: string): string | null;
  text: string;
}

/** POST/GET with fetch (for everything fetch is willing to send). */
export async function sendFetch(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<Sent> {
  const response = await fetch(url, {
    method: init.method ?? 'POST',
    headers: init.headers,
    body: init.body,
  });
  const text = await response.text();
  return { status: response.status, header: (name) => response.headers.get(name), text };
}

/** Bytes exactly as given (header values fetch refuses, repeated header lines). */
export async function sendRaw(
  baseUrl: string,
  options: { method?: string; path: string; headerLines: string[]; body?: string },
): Promise<Sent> {
  const response = await rawHttpRequest(baseUrl, options);
  return { status: response.status, header: (name) => response.header(name) ?? null, text: response.body };
}

/** The human-readable error message of any error body this app sends (tRPC envelope, batch, or `{error}`). */
export function errorMessageOf(text: string): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  const first = Array.isArray(body) ? body[0] : body;
  if (!first || typeof first !== 'object' || !('error' in first)) return undefined;
  const error = (first as { error: unknown }).error;
  if (typeof error === 'string') return error;
  const json = (error as { json?: { message?: unknown } } | null)?.json;
  return typeof json?.message === 'string' ? json.message : undefined;
}

/** The tRPC error code (`data.code`) of an error body, if it is one. */
export function trpcCodeOf(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as unknown;
    const first = (Array.isArray(body) ? body[0] : body) as {
      error?: { json?: { data?: { code?: string } } };
    };
    return first?.error?.json?.data?.code;
  } catch {
    return undefined;
  }
}

export const SESSION_COOKIE = 'idem_session';

/** A guest session cookie value like the app's (HS256, issuer `idem`), with an optional expiry in the past. */
export async function signSession(
  guestId: string,
  secret: string,
  { expiresAtSeconds }: { expiresAtSeconds?: number } = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(guestId)
    .setIssuer('idem')
    .setIssuedAt(expiresAtSeconds === undefined ? now : expiresAtSeconds - 3_600)
    .setExpirationTime(expiresAtSeconds ?? now + 3_600)
    .sign(new TextEncoder().encode(secret));
}

/** An unsigned JWT (`alg: none`) naming any guest id: what a forger would try first. */
export function unsignedSession(guestId: string): string {
  const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  return `${encode({ alg: 'none' })}.${encode({ sub: guestId, iss: 'idem', iat: now, exp: now + 3_600 })}.`;
}

/** The provider's webhook signature scheme (`t=…,v1=<hex HMAC-SHA256 of "t.body">`). */
export function signWebhook(body: string, secret: string, timestamp = Math.floor(Date.now() / 1000)): string {
  const signature = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${signature}`;
}

export interface CaseResult {
  name: string;
  status: number;
  expected: string;
  code: string;
  stored: string;
  followUp: string;
}

/** The summary table, one line per case, for the test output. */
export function formatSummary(results: readonly CaseResult[]): string {
  const header: CaseResult = {
    name: 'case',
    status: 0,
    expected: 'expected',
    code: 'tRPC code / error',
    stored: 'stored',
    followUp: 'next valid request',
  };
  const rows = [header, ...results];
  const width = (pick: (row: CaseResult) => string) => Math.max(...rows.map((row) => pick(row).length));
  const columns: Array<(row: CaseResult) => string> = [
    (row) => row.name,
    (row) => (row === header ? 'status' : String(row.status)),
    (row) => row.expected,
    (row) => row.code,
    (row) => row.stored,
    (row) => row.followUp,
  ];
  const widths = columns.map(width);
  const line = (row: CaseResult) =>
    `| ${columns.map((pick, index) => pick(row).padEnd(widths[index] ?? 0)).join(' | ')} |`;
  const rule = `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`;
  const fiveXx = results.filter((row) => row.status >= 500).length;
  const stored = results.filter((row) => row.stored.startsWith('YES')).length;
  return [
    line(header),
    rule,
    ...results.map(line),
    '',
    `hostile input: ${results.length} cases, ${fiveXx} × 5xx, ${stored} stored`,
  ].join('\n');
}
