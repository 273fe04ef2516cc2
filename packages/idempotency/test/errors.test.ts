/**
 * What a client reads when the layer refuses a request: every refusal has its contract status, its stable code,
 * and a message that says what went wrong and what to send instead. The two refusals only the tRPC adapter
 * makes (a streamed response, a principal a retry will not have) are checked end to end: 400, nothing claimed,
 * nothing run.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { initTRPC } from '@trpc/server';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  batchedError,
  inProgressError,
  invalidInputError,
  keyReusedError,
  leaseLostError,
  malformedKeyError,
  missingKeyError,
  storeUnavailableError,
  streamedError,
  tooManyInFlightError,
  unstableScopeError,
} from '../src/core/errors.ts';
import {
  IdempotencyError,
  IdempotencyErrorCode,
  IdempotencyStoreSetupError,
  unstableScope,
} from '../src/index.ts';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '../src/prisma/index.ts';
import { createIdempotency } from '../src/trpc/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';
import { keyRows, requestContext, type TestContext, trpcFailure } from './support/trpc.ts';

describe('every refusal: its status, its code, and what to do', () => {
  // The contract's table: 400 the client's request is unusable, 409 wait and retry the same key, 422 a new
  // key for a new request, 429 too many keys in flight. The message is what a client developer reads in the
  // response: it is pinned whole — what went wrong, and what to send instead. (Each error is made inside the
  // test, not when the table is built.)
  it.each([
    [
      'missing key',
      () => missingKeyError(),
      IdempotencyErrorCode.missingKey,
      400,
      'This operation requires an Idempotency-Key header (a UUID per intent, reused on every retry).',
    ],
    [
      'malformed key',
      () => malformedKeyError('it is empty'),
      IdempotencyErrorCode.malformedKey,
      400,
      'The Idempotency-Key header is malformed: it is empty. Send 1–255 printable ASCII characters.',
    ],
    [
      'batched',
      () => batchedError(),
      IdempotencyErrorCode.batched,
      400,
      'An idempotent mutation must be sent alone, not in a batch: its Idempotency-Key belongs to one operation.',
    ],
    [
      'invalid input',
      () => invalidInputError(),
      IdempotencyErrorCode.invalidInput,
      400,
      'The request input cannot be fingerprinted for its Idempotency-Key: it is nested too deeply or holds a ' +
        'string that is not valid Unicode (e.g. a lone surrogate).',
    ],
    [
      'in progress',
      () => inProgressError(2),
      IdempotencyErrorCode.inProgress,
      409,
      'A request with this Idempotency-Key is still being processed. Retry after a moment with the same key.',
    ],
    [
      'lease lost',
      () => leaseLostError(3),
      IdempotencyErrorCode.leaseLost,
      409,
      'This request took too long and another attempt with the same Idempotency-Key took over. Retry with the ' +
        'same key.',
    ],
    [
      'key reused',
      () => keyReusedError(),
      IdempotencyErrorCode.keyReused,
      422,
      'This Idempotency-Key was already used with a different request. Use a new key for a new request.',
    ],
    [
      'too many',
      () => tooManyInFlightError(4, 5),
      IdempotencyErrorCode.tooManyInFlight,
      429,
      'Too many requests in progress: at most 4 Idempotency-Keys may be in flight at once for one caller. ' +
        'Nothing was done; retry after a moment (the same key is fine).',
    ],
    [
      'unstable scope',
      () => unstableScopeError('Keep the cookie.'),
      IdempotencyErrorCode.unstableScope,
      400,
      'This request has no stable principal for its Idempotency-Key, so a retry could not be recognised and ' +
        'nothing was done. Keep the cookie.',
    ],
    [
      'streamed',
      () => streamedError(),
      IdempotencyErrorCode.streamed,
      400,
      'An idempotent mutation cannot be sent on a streamed response (trpc-accept: application/jsonl, ' +
        'httpBatchStreamLink): its status and headers (Idempotent-Replayed, Retry-After) are sent before the ' +
        'result. Nothing was done; send it without trpc-accept (httpLink).',
    ],
    [
      'store unavailable',
      () => storeUnavailableError(1, new Error('P2028')),
      IdempotencyErrorCode.storeUnavailable,
      503,
      'The service could not take this request now. Nothing was done; retry after a moment with the same key.',
    ],
  ])('%s', (_name, makeError, code, status, message) => {
    const error = makeError();
    expect(error).toBeInstanceOf(IdempotencyError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('IdempotencyError');
    expect(error.code).toBe(code);
    expect(error.httpStatus).toBe(status);
    expect(error.message).toBe(message);
  });

  it('409, 429 and 503 carry the seconds to wait; nothing else does', () => {
    expect(inProgressError(2).retryAfterSeconds).toBe(2);
    expect(storeUnavailableError(6, null).retryAfterSeconds).toBe(6);
    expect(leaseLostError(3).retryAfterSeconds).toBe(3);
    expect(tooManyInFlightError(4, 5).retryAfterSeconds).toBe(5);
    for (const error of [missingKeyError(), keyReusedError(), batchedError(), streamedError()])
      expect(error.retryAfterSeconds).toBeUndefined();
  });

  // A server fault, not a refusal: what the server's logs show must name it, with its how-to-fix message.
  it('a store that is not set up is an IdempotencyStoreSetupError by name, with its message', () => {
    const error = new IdempotencyStoreSetupError('Run the migration that creates the idempotency table.');
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('IdempotencyStoreSetupError');
    expect(String(error)).toBe(
      'IdempotencyStoreSetupError: Run the migration that creates the idempotency table.',
    );
  });
});

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

describe('refusals only the tRPC adapter makes', () => {
  const UNSTABLE = 'minted-for-this-request';
  function setup() {
    const t = initTRPC.context<TestContext>().create({ transformer: superjson, isDev: false });
    const idempotency = createIdempotency<TestContext, PrismaTransactionLike<Database>>({
      store: createPrismaIdempotencyStore(db),
      transformer: superjson,
      // A guest session created by this very request: a retry would arrive as someone else.
      getScope: (ctx) =>
        ctx.principalId === UNSTABLE
          ? unstableScope('Send the session cookie you were given.')
          : ctx.principalId,
      getRequestHeaders: (ctx) => ctx.headers,
      getResponseHeaders: (ctx) => ctx.resHeaders,
      isStreamed: (ctx) => ctx.streamed === true,
    });
    let executions = 0;
    const router = t.router({
      pay: t.procedure
        .concat(idempotency.external())
        .input(z.object({ cents: z.number() }))
        .mutation(() => {
          executions += 1;
          return { paid: true };
        }),
    });
    return { caller: (ctx: TestContext) => router.createCaller(ctx), executions: () => executions };
  }

  it('a streamed response → 400 idempotency_streamed_response; nothing claimed, nothing run', async () => {
    const { caller, executions } = setup();
    const principal = uniqueScope();
    const key = randomUUID();
    const ctx = { ...requestContext(key, principal), streamed: true };
    const error = await trpcFailure(caller(ctx).pay({ cents: 100 }));
    expect(error.code).toBe('BAD_REQUEST');
    expect((error.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.streamed);
    expect(error.message).toMatch(/send it without trpc-accept/);
    expect(executions()).toBe(0);
    expect(await keyRows(db, principal)).toEqual([]);
    // Control: the same request on a plain response runs.
    expect(await caller(requestContext(key, principal)).pay({ cents: 100 })).toEqual({ paid: true });
    expect(executions()).toBe(1);
  });

  it('a principal a retry will not have → 400 idempotency_scope_unstable with the how-to-fix', async () => {
    const { caller, executions } = setup();
    const key = randomUUID();
    const error = await trpcFailure(caller(requestContext(key, UNSTABLE)).pay({ cents: 100 }));
    expect(error.code).toBe('BAD_REQUEST');
    expect((error.cause as IdempotencyError).code).toBe(IdempotencyErrorCode.unstableScope);
    expect(error.message).toMatch(/Send the session cookie you were given\.$/);
    expect(executions()).toBe(0);
    expect(await keyRows(db, UNSTABLE)).toEqual([]);
    // Control: a stable principal with the same key runs.
    const principal = uniqueScope();
    expect(await caller(requestContext(key, principal)).pay({ cents: 100 })).toEqual({ paid: true });
    expect(executions()).toBe(1);
  });
});
