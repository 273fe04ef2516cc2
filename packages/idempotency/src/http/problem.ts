/**
 * Errors on the wire as RFC 9457 problem details (`application/problem+json`): one stable `type` URI per
 * idempotency error code — the same codes the tRPC adapter carries as its error's cause — so a client branches
 * on `type` (or `code`) and never on the wording. A 401 and a 500 are plain HTTP problems (`about:blank`).
 */
import { type IdempotencyError, IdempotencyErrorCode } from '../core/errors.ts';
import { RETRY_AFTER_HEADER } from '../protocol.ts';
import type { HttpAnswer } from './answer.ts';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** `urn:idem:problem:<code>`: stable, and not a URL a client would be tempted to fetch. */
export function problemTypeOf(code: IdempotencyErrorCode): string {
  return `urn:idem:problem:${code}`;
}

const titleByCode: Record<IdempotencyErrorCode, string> = {
  [IdempotencyErrorCode.missingKey]: 'Idempotency-Key missing',
  [IdempotencyErrorCode.malformedKey]: 'Idempotency-Key malformed',
  [IdempotencyErrorCode.batched]: 'Idempotent request in a batch',
  [IdempotencyErrorCode.inProgress]: 'Request in progress',
  [IdempotencyErrorCode.leaseLost]: 'Request taken over',
  [IdempotencyErrorCode.keyReused]: 'Idempotency-Key reused',
  [IdempotencyErrorCode.invalidInput]: 'Request body cannot be fingerprinted',
  [IdempotencyErrorCode.tooManyInFlight]: 'Too many requests in progress',
  [IdempotencyErrorCode.unstableScope]: 'No stable principal',
  [IdempotencyErrorCode.streamed]: 'Streamed response',
  [IdempotencyErrorCode.bodyTooLarge]: 'Request body too large',
  [IdempotencyErrorCode.storeUnavailable]: 'Service unavailable',
};

/** The body of a problem response. `code` repeats the type's last part for clients that prefer a token. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail?: string;
  code?: IdempotencyErrorCode;
}

/**
 * The idempotency layer's own refusal: its status, `Retry-After` for 409, 429 and 503, and the problem. With
 * `docsUrl`, a `Link: <docsUrl#code>; rel="describedby"` header points at its documentation
 * (draft-ietf-httpapi-idempotency-key-header-07, section 2.7).
 */
export function idempotencyProblem(error: IdempotencyError, docsUrl?: string): HttpAnswer {
  const problem: ProblemDetails = {
    type: problemTypeOf(error.code),
    title: titleByCode[error.code],
    status: error.httpStatus,
    detail: error.message,
    code: error.code,
  };
  const headers: Array<[string, string]> =
    error.retryAfterSeconds === undefined ? [] : [[RETRY_AFTER_HEADER, String(error.retryAfterSeconds)]];
  if (docsUrl !== undefined) headers.push(['link', `<${docsUrl}#${error.code}>; rel="describedby"`]);
  return problemAnswer(problem, headers);
}

/** `getScope` found no principal. */
export function unauthenticatedProblem(): HttpAnswer {
  return problemAnswer({
    type: 'about:blank',
    title: 'Unauthorized',
    status: 401,
    detail: 'An idempotent request needs a principal.',
  });
}

/** Anything unexpected: the cause goes to the server's `onError`, never into the body. */
export function internalProblem(): HttpAnswer {
  return problemAnswer({ type: 'about:blank', title: 'Internal Server Error', status: 500 });
}

function problemAnswer(problem: ProblemDetails, headers: Array<[string, string]> = []): HttpAnswer {
  return {
    status: problem.status,
    headers: [['content-type', PROBLEM_CONTENT_TYPE], ...headers],
    body: new TextEncoder().encode(JSON.stringify(problem)),
  };
}
