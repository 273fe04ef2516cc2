/**
 * What the kit leaves to a plain HTTP API and draft-07 asks of it (§2.7): an error is an RFC 9457 problem
 * document (`application/problem+json` with `type`, `title` and `status`), and points to documentation with
 * `Link: <…>; rel="describedby"`. Probed with a request without a key (400) and a reused key with another
 * payload (422).
 */
import { randomUUID } from 'node:crypto';
import { IDEMPOTENCY_KEY_HEADER } from '@idem/idempotency';
import type { ConformanceResponse, ConformanceTarget } from '@idem/idempotency/testing';
import { HttpCheckId } from './profiles.ts';

export interface HttpCheckResult {
  id: HttpCheckId;
  title: string;
  passed: boolean;
  detail: string;
}

interface Probe {
  what: string;
  expected: number;
  response: ConformanceResponse;
  body: string;
}

async function send<TInput>(
  target: ConformanceTarget<TInput>,
  input: TInput,
  key: string | null,
): Promise<{ response: ConformanceResponse; body: string }> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    ...target.headers,
    ...target.principals[0].headers,
    ...(key === null ? {} : { [IDEMPOTENCY_KEY_HEADER]: key }),
  };
  const response = await (target.fetch ?? fetch)(target.url, {
    method: 'POST',
    headers,
    body: JSON.stringify(input),
  });
  return { response, body: await response.text() };
}

async function probes<TInput>(target: ConformanceTarget<TInput>): Promise<Probe[]> {
  const missing = await send(target, target.input(), null);
  const key = randomUUID();
  const first = target.input();
  await send(target, first, key);
  const reused = await send(target, target.differentInput(), key);
  return [
    { what: 'no Idempotency-Key', expected: 400, ...missing },
    { what: 'a reused key with another payload', expected: 422, ...reused },
  ];
}

function problemShapeError({ what, expected, response, body }: Probe): string | null {
  if (response.status !== expected) return `${what}: expected HTTP ${expected}, got ${response.status}`;
  const type = response.headers.get('content-type') ?? '';
  if (!type.toLowerCase().startsWith('application/problem+json'))
    return `${what}: Content-Type is "${type}", not application/problem+json`;
  let document: unknown;
  try {
    document = JSON.parse(body);
  } catch {
    return `${what}: the body is not JSON: ${body.slice(0, 120)}`;
  }
  const problem = document as Record<string, unknown> | null;
  if (!problem || typeof problem !== 'object') return `${what}: the body is not a JSON object`;
  for (const member of ['type', 'title'] as const)
    if (typeof problem[member] !== 'string') return `${what}: no string "${member}" member`;
  if (problem.status !== undefined && problem.status !== expected)
    return `${what}: "status" is ${JSON.stringify(problem.status)}, the response's is ${expected}`;
  return null;
}

function describedBy(response: ConformanceResponse): string | null {
  const link = response.headers.get('link') ?? '';
  const match = link.match(/<([^>]+)>\s*;[^,]*\brel="?describedby"?/i);
  return match?.[1] ?? null;
}

export async function runHttpChecks<TInput>(target: ConformanceTarget<TInput>): Promise<HttpCheckResult[]> {
  let sent: Probe[];
  try {
    sent = await probes(target);
  } catch (error) {
    const detail = `the probes could not run: ${error instanceof Error ? error.message : String(error)}`;
    return [
      { id: HttpCheckId.problemDetails, title: PROBLEM_TITLE, passed: false, detail },
      { id: HttpCheckId.docsLink, title: LINK_TITLE, passed: false, detail },
    ];
  }
  const shapeErrors = sent.map(problemShapeError).filter((error): error is string => error !== null);
  const links = sent.map((probe) => [probe.what, describedBy(probe.response)] as const);
  const missingLinks = links.filter(([, url]) => url === null).map(([what]) => what);
  return [
    {
      id: HttpCheckId.problemDetails,
      title: PROBLEM_TITLE,
      passed: shapeErrors.length === 0,
      detail: shapeErrors.length === 0 ? 'the 400 and the 422 are problem documents' : shapeErrors.join('; '),
    },
    {
      id: HttpCheckId.docsLink,
      title: LINK_TITLE,
      passed: missingLinks.length === 0,
      detail:
        missingLinks.length === 0
          ? `Link rel="describedby": ${links.map(([, url]) => url).join(', ')}`
          : `no Link rel="describedby" on: ${missingLinks.join(', ')}`,
    },
  ];
}

const PROBLEM_TITLE = 'errors are problem documents (application/problem+json with type and title)';
const LINK_TITLE = 'errors link to their documentation (Link: <…>; rel="describedby")';
