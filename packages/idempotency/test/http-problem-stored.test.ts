/**
 * The plain HTTP answers the library builds itself, pinned byte for byte: the RFC 9457 problems
 * (src/http/problem.ts: status, headers in order, the JSON body) and what the store keeps of a handler's answer
 * and gives back on a replay (src/http/stored.ts: which statuses, which headers, the body's bytes).
 */
import { describe, expect, it } from 'vitest';
import {
  bodyTooLargeError,
  IdempotencyError,
  IdempotencyErrorCode,
  inProgressError,
  keyReusedError,
  missingKeyError,
} from '../src/core/errors.ts';
import type { StoredResponse } from '../src/core/record.ts';
import { hasNullBody } from '../src/http/answer.ts';
import {
  idempotencyProblem,
  internalProblem,
  PROBLEM_CONTENT_TYPE,
  problemTypeOf,
  unauthenticatedProblem,
} from '../src/http/problem.ts';
import {
  DEFAULT_REPLAYED_HEADERS,
  errorCodeOfStatus,
  replayAnswerOf,
  responseToStore,
} from '../src/http/stored.ts';
import { DEFAULT_OPTIONS } from '../src/index.ts';

const text = (body: Uint8Array) => new TextDecoder().decode(body);

describe('problems', () => {
  it('the content type and the type URI', () => {
    expect(PROBLEM_CONTENT_TYPE).toBe('application/problem+json');
    expect(problemTypeOf(IdempotencyErrorCode.keyReused)).toBe('urn:idem:problem:idempotency_key_reused');
  });

  it('an idempotency error without Retry-After: only Content-Type; the body is type, title, status, detail, code', () => {
    const error = keyReusedError();
    const answer = idempotencyProblem(error);
    expect(answer.status).toBe(422);
    expect(answer.headers).toEqual([['content-type', 'application/problem+json']]);
    expect(JSON.parse(text(answer.body))).toEqual({
      type: 'urn:idem:problem:idempotency_key_reused',
      title: 'Idempotency-Key reused',
      status: 422,
      detail: error.message,
      code: 'idempotency_key_reused',
    });
  });

  it('with Retry-After (409): the header, after Content-Type, in whole seconds', () => {
    const answer = idempotencyProblem(inProgressError(3));
    expect(answer.status).toBe(409);
    expect(answer.headers).toEqual([
      ['content-type', 'application/problem+json'],
      ['Retry-After', '3'],
    ]);
    expect(JSON.parse(text(answer.body))).toMatchObject({ title: 'Request in progress', status: 409 });
  });

  it('a Retry-After of 0 is still sent', () => {
    expect(idempotencyProblem(inProgressError(0)).headers).toContainEqual(['Retry-After', '0']);
  });

  it('with a docs URL: a Link to the code’s anchor, rel="describedby", last', () => {
    const answer = idempotencyProblem(inProgressError(2), 'https://api.example/docs/errors');
    expect(answer.headers).toEqual([
      ['content-type', 'application/problem+json'],
      ['Retry-After', '2'],
      ['link', '<https://api.example/docs/errors#idempotency_request_in_progress>; rel="describedby"'],
    ]);
    expect(idempotencyProblem(missingKeyError(), 'https://api.example/d').headers).toEqual([
      ['content-type', 'application/problem+json'],
      ['link', '<https://api.example/d#idempotency_key_missing>; rel="describedby"'],
    ]);
  });

  it.each([
    [IdempotencyErrorCode.missingKey, 'Idempotency-Key missing'],
    [IdempotencyErrorCode.malformedKey, 'Idempotency-Key malformed'],
    [IdempotencyErrorCode.batched, 'Idempotent request in a batch'],
    [IdempotencyErrorCode.inProgress, 'Request in progress'],
    [IdempotencyErrorCode.leaseLost, 'Request taken over'],
    [IdempotencyErrorCode.keyReused, 'Idempotency-Key reused'],
    [IdempotencyErrorCode.invalidInput, 'Request body cannot be fingerprinted'],
    [IdempotencyErrorCode.tooManyInFlight, 'Too many requests in progress'],
    [IdempotencyErrorCode.unstableScope, 'No stable principal'],
    [IdempotencyErrorCode.streamed, 'Streamed response'],
    [IdempotencyErrorCode.bodyTooLarge, 'Request body too large'],
    [IdempotencyErrorCode.storeUnavailable, 'Service unavailable'],
  ])('%s: titled %j', (code, title) => {
    const answer = idempotencyProblem(new IdempotencyError(code, 'why'));
    expect(JSON.parse(text(answer.body))).toMatchObject({ type: `urn:idem:problem:${code}`, title, code });
  });

  it('413: its own status and detail', () => {
    const answer = idempotencyProblem(bodyTooLargeError(10));
    expect(answer.status).toBe(413);
    expect(JSON.parse(text(answer.body)).detail).toMatch(/\(10 bytes\)/);
  });

  it('401 and 500: about:blank problems, nothing else in them', () => {
    const unauthenticated = unauthenticatedProblem();
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers).toEqual([['content-type', 'application/problem+json']]);
    expect(text(unauthenticated.body)).toBe(
      '{"type":"about:blank","title":"Unauthorized","status":401,"detail":"An idempotent request needs a principal."}',
    );
    const internal = internalProblem();
    expect(internal.status).toBe(500);
    expect(internal.headers).toEqual([['content-type', 'application/problem+json']]);
    expect(text(internal.body)).toBe('{"type":"about:blank","title":"Internal Server Error","status":500}');
  });
});

describe('hasNullBody', () => {
  it.each([
    [101, true],
    [103, true],
    [204, true],
    [205, true],
    [304, true],
    [200, false],
    [201, false],
    [302, false],
  ])('%i → %s', (status, none) => {
    expect(hasNullBody(status)).toBe(none);
  });
});

describe('what is stored, and its replay', () => {
  const options = { ...DEFAULT_OPTIONS, storedErrorCodes: ['PAYMENT_REQUIRED', 'HTTP_418', 'BAD_GATEWAY'] };
  const replayed = [...DEFAULT_REPLAYED_HEADERS];

  it('the default replayed headers', () => {
    expect(DEFAULT_REPLAYED_HEADERS).toEqual(['content-type', 'location', 'etag']);
  });

  it.each([
    [400, 'BAD_REQUEST'],
    [401, 'UNAUTHORIZED'],
    [402, 'PAYMENT_REQUIRED'],
    [405, 'METHOD_NOT_SUPPORTED'],
    [408, 'TIMEOUT'],
    [409, 'CONFLICT'],
    [413, 'PAYLOAD_TOO_LARGE'],
    [428, 'PRECONDITION_REQUIRED'],
    [429, 'TOO_MANY_REQUESTS'],
    [499, 'CLIENT_CLOSED_REQUEST'],
    [500, 'INTERNAL_SERVER_ERROR'],
    [501, 'NOT_IMPLEMENTED'],
    [502, 'BAD_GATEWAY'],
    [503, 'SERVICE_UNAVAILABLE'],
    [504, 'GATEWAY_TIMEOUT'],
    [418, 'HTTP_418'],
    [599, 'HTTP_599'],
  ])('status %i is named %s', (status, name) => {
    expect(errorCodeOfStatus(status)).toBe(name);
  });

  it('below 400: stored as the outcome; headers matched case-insensitively, kept lower-case, repeats joined', () => {
    const stored = responseToStore(
      {
        status: 399,
        headers: [
          ['Content-Type', 'text/plain'],
          ['ETag', '"a"'],
          ['X-Other', 'no'],
          ['etag', '"b"'],
        ],
        body: new TextEncoder().encode('héllo'),
      },
      options,
      replayed,
    );
    expect(stored).toEqual({
      kind: 'output',
      httpStatus: 399,
      body: 'héllo',
      headers: { 'content-type': 'text/plain', etag: '"a", "b"' },
    });
    expect(stored && 'bodyEncoding' in stored).toBe(false);
  });

  it('a stored 4xx: kind error, its name, "HTTP <status>", the body and headers', () => {
    expect(
      responseToStore(
        { status: 418, headers: [['Location', '/teapot']], body: new TextEncoder().encode('{}') },
        options,
        replayed,
      ),
    ).toEqual({
      kind: 'error',
      httpStatus: 418,
      code: 'HTTP_418',
      message: 'HTTP 418',
      body: '{}',
      headers: { location: '/teapot' },
    });
  });

  it('a 5xx is never stored, even when named in storedErrorCodes; a 4xx not named is not stored', () => {
    const answer = (status: number) => ({ status, headers: [], body: new Uint8Array() });
    expect(responseToStore(answer(502), options, replayed)).toBeNull();
    expect(
      responseToStore(answer(500), { ...options, storedErrorCodes: ['INTERNAL_SERVER_ERROR'] }, replayed),
    ).toBeNull();
    expect(responseToStore(answer(400), options, replayed)).toBeNull();
    expect(responseToStore(answer(499), options, replayed)).toBeNull();
  });

  it('replay: the stored headers, then Idempotent-Replayed: true; the status; a text body as its UTF-8 bytes', () => {
    const stored: StoredResponse = {
      kind: 'output',
      httpStatus: 201,
      body: 'héllo',
      headers: { 'content-type': 'text/plain', location: '/x' },
    };
    const answer = replayAnswerOf(stored);
    expect(answer.status).toBe(201);
    expect(answer.headers).toEqual([
      ['content-type', 'text/plain'],
      ['location', '/x'],
      ['Idempotent-Replayed', 'true'],
    ]);
    expect([...answer.body]).toEqual([...new TextEncoder().encode('héllo')]);
  });

  it('replay of a base64 body: the exact bytes; of a record without headers: only Idempotent-Replayed', () => {
    const bytes = new Uint8Array([0xff, 0x00, 0xc3, 0x28]);
    const stored = responseToStore({ status: 200, headers: [], body: bytes }, options, replayed);
    expect(stored).toMatchObject({ bodyEncoding: 'base64', body: '/wDDKA==' });
    if (!stored) throw new Error('not stored');
    expect([...replayAnswerOf(stored).body]).toEqual([...bytes]);
    expect(replayAnswerOf({ kind: 'output', httpStatus: 200, body: 'x' }).headers).toEqual([
      ['Idempotent-Replayed', 'true'],
    ]);
  });

  it('a record without a body (written by the tRPC adapter): its status and {"code"} as JSON', () => {
    const error = replayAnswerOf({
      kind: 'error',
      httpStatus: 402,
      code: 'PAYMENT_REQUIRED',
      message: 'Declined',
    });
    expect(error.status).toBe(402);
    expect(text(error.body)).toBe('{"code":"PAYMENT_REQUIRED"}');
  });
});
