/**
 * Each conformance check of the kit (`./testing`) against a small app in this process (support/
 * fake-conformance-app.ts, reached through the target's `fetch`): the correct app passes with the account the
 * check gives of it, and an app with one fault FAILS the check written for that fault, with the detail a
 * developer would read. Every message is pinned: a check that stops looking at something fails here.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type ConformanceCheckId,
  type ConformanceOptions,
  type ConformanceTarget,
  conformanceChecks,
  runConformanceCheck,
} from '../src/testing/index.ts';
import { createFakeApp, type FakeAppOptions, type Order } from './support/fake-conformance-app.ts';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
/** The first answer of the correct app (its first execution), as the kit describes it. */
const FIRST_BODY = '{"number":1,"sku":"book","quantity":1}';

function checkOf(id: ConformanceCheckId) {
  const check = conformanceChecks.find((candidate) => candidate.id === id);
  if (!check) throw new Error(`no check ${id}`);
  return check;
}

async function run(
  id: ConformanceCheckId,
  app: FakeAppOptions = {},
  options: ConformanceOptions = {},
  adjust: (target: ConformanceTarget<Order>) => ConformanceTarget<Order> = (target) => target,
) {
  // Every answer takes 1 ms on a fake clock (Date only; timers are real): a duplicate sent after the first was
  // received is sent in a later millisecond, as over a network.
  const fake = createFakeApp({ onAnswer: () => vi.setSystemTime(Date.now() + 1), ...app });
  const result = await runConformanceCheck(checkOf(id), adjust(fake.target), {
    maxRetryWaitMs: 1,
    inFlightProbeDelayMs: 1,
    capSettleMs: 1,
    ...options,
  });
  return { ...result, executions: fake.state.executions, fake };
}

async function passes(id: ConformanceCheckId, app: FakeAppOptions = {}, options: ConformanceOptions = {}) {
  const result = await run(id, app, options);
  expect(result.detail).not.toMatch(/^the check could not run/);
  expect(result.passed, result.detail).toBe(true);
  return result.detail;
}

async function failure(
  id: ConformanceCheckId,
  app: FakeAppOptions,
  options: ConformanceOptions = {},
  adjust?: (target: ConformanceTarget<Order>) => ConformanceTarget<Order>,
) {
  const result = await run(id, app, options, adjust);
  expect(result.passed, result.detail).toBe(false);
  return result.detail;
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('first-request', () => {
  it('passes: its status, how long it took (a fake clock: each request takes 7 ms), 1 execution', async () => {
    const tick = () => vi.setSystemTime(Date.now() + 7);
    expect(await passes('first-request', { onAnswer: tick })).toBe('201 in 7 ms, 1 execution');
    expect(await passes('first-request', { onAnswer: tick, faults: { successStatus: 200 } })).toBe(
      '200 in 7 ms, 1 execution',
    );
    expect(await passes('first-request', { onAnswer: tick, faults: { successStatus: 299 } })).toMatch(
      /^299 /,
    );
    expect(await passes('first-request', { store: false, faults: { storeSaysProcessing: true } })).toMatch(
      /^201/,
    );
  });

  it.each([
    [{ successStatus: 300 }, `first request: expected a success (2xx), got 300 ${FIRST_BODY}`],
    [{ replayedOnFirst: true }, 'first request: expected a fresh execution, got Idempotent-Replayed: true'],
    [{ retryAfterOnSuccess: true }, 'first request: a success must not carry Retry-After (1)'],
    [{ doubleExecution: true }, 'first request: expected 1 execution(s) of the procedure, counted 2'],
    [{ unprotected: true }, 'first request: expected a completed record in the store, found none'],
    [
      { storeSaysProcessing: true },
      'first request: expected a completed record in the store, found processing',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('first-request', { faults })).toBe(detail);
  });
});

describe('a target whose principal A has no scope: the store is not read', () => {
  const withoutScopes = (target: ConformanceTarget<Order>): ConformanceTarget<Order> => ({
    ...target,
    principals: [{ headers: target.principals[0].headers }, { headers: target.principals[1].headers }],
  });

  it.each([
    ['first-request', {}],
    ['fingerprint', {}],
    ['invalid-input', {}],
    ['in-flight-cap', { cap: 2, inFlight: 'slow' }],
  ] as const)('%s passes', async (id, app) => {
    const result = await run(id, app, {}, withoutScopes);
    expect(result.passed, result.detail).toBe(true);
  });
});

describe('replay', () => {
  it('passes: two replays of the first body, 1 execution', async () => {
    expect(await passes('replay')).toBe(
      `2 replays byte-identical to the first ${FIRST_BODY.length}-character body, 1 execution`,
    );
  });

  it.each([
    [{ noReplayedHeader: true }, 'second request: expected Idempotent-Replayed: true, got no such header'],
    [{ replayedHeaderValue: 'yes' }, 'second request: expected Idempotent-Replayed: true, got yes'],
    [{ replaysBreakFrom: 2 }, 'third request: expected Idempotent-Replayed: true, got no such header'],
    [
      { replayStatus: 200 },
      `second request: expected HTTP 201, got 200 (Idempotent-Replayed: true) ${FIRST_BODY}`,
    ],
    [
      { replayBodyDiffers: true },
      `second request: the replayed body differs from the first.\n  first:  ${FIRST_BODY}\n  replay: {"replayed":1,${FIRST_BODY.slice(1)}`,
    ],
    [{ replayDrops: 'location' }, "second request: Location null differs from the first's /orders/1"],
    [{ replayDrops: 'etag' }, 'second request: ETag null differs from the first\'s "1"'],
    [
      { replayDrops: 'content-type' },
      "second request: Content-Type text/plain;charset=UTF-8 differs from the first's application/json",
    ],
    [
      { executesOnReplay: true },
      'three requests with one key: expected 1 execution(s) of the procedure, counted 3',
    ],
    [{ replayedOnFirst: true }, 'first request: expected a fresh execution, got Idempotent-Replayed: true'],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('replay', { faults })).toBe(detail);
  });
});

describe('replay-canonical-input', () => {
  it('passes: reordered and re-spaced; an input with no two-key object is only re-spaced', async () => {
    expect(await passes('replay-canonical-input')).toBe(
      'reordered, re-spaced body replayed byte-identically',
    );
    const single = await run('replay-canonical-input', { faults: { anyInput: true } }, {}, (target) => ({
      ...target,
      input: () => ({ items: ['b', null] }) as never,
    }));
    expect(single.detail).toBe('re-spaced body replayed (the input has no object with two keys to reorder)');
  });

  it('an app that fingerprints the raw text: the reordered request is refused', async () => {
    expect(await failure('replay-canonical-input', { faults: { rawFingerprint: true } })).toBe(
      'the reordered request: expected HTTP 201, got 422 {"error":"Idempotency-Key reused with another request"}',
    );
  });

  it.each([
    ['an object in an array', { items: [{ a: 1, b: 2 }] }],
    ['an object in an object', { outer: { a: 1, b: 2 } }],
  ])('keys are reordered at every depth: %s (an app blind to spacing only sees it)', async (_name, input) => {
    const detail = await failure(
      'replay-canonical-input',
      { faults: { anyInput: true, spacingInsensitive: true } },
      {},
      (target) => ({ ...target, input: () => input as never }),
    );
    expect(detail).toMatch(/^the reordered request: expected HTTP 201, got 422 /);
  });

  it('counts executions', async () => {
    expect(await failure('replay-canonical-input', { faults: { executesOnReplay: true } })).toBe(
      'two requests with one key: expected 1 execution(s) of the procedure, counted 2',
    );
  });
});

describe('key-sf-string', () => {
  it('passes', async () => {
    expect(await passes('key-sf-string')).toBe('bare then quoted: 1 execution, 1 replay');
  });

  it.each([
    [{ quotedIsAnotherKey: true }, 'quoted key: expected Idempotent-Replayed: true, got no such header'],
    [{ replayedOnFirst: true }, 'bare key: expected a fresh execution, got Idempotent-Replayed: true'],
    [{ executesOnReplay: true }, 'bare then quoted key: expected 1 execution(s) of the procedure, counted 2'],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('key-sf-string', { faults })).toBe(detail);
  });
});

describe('stored-error', () => {
  it('passes for 402, 403, 408, 499', async () => {
    expect(await passes('stored-error')).toBe(
      '402 stored and replayed byte-identically; the replay executed nothing',
    );
    for (const businessStatus of [403, 408, 499])
      expect(await passes('stored-error', { faults: { businessStatus } })).toMatch(
        new RegExp(`^${businessStatus} `),
      );
  });

  it.each([400, 401, 409, 429, 500, 302])(
    'fails for a business error answered %i',
    async (businessStatus) => {
      expect(await failure('stored-error', { faults: { businessStatus } })).toBe(
        `business error: expected a 4xx other than 400, 401, 409 and 429, got ${businessStatus} {"error":"card declined"}`,
      );
    },
  );

  it.each([
    [
      { replayedOnBusinessError: true },
      'business error: the first answer must not be marked Idempotent-Replayed',
    ],
    [{ errorsNotStored: true }, 'the same key again: expected Idempotent-Replayed: true, got no such header'],
    [{ executesOnReplay: true }, 'the replayed error: expected 1 execution(s) of the procedure, counted 2'],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('stored-error', { faults })).toBe(detail);
  });

  it('without businessErrorInput it is not available, and cannot pass if run anyway', async () => {
    expect(checkOf('stored-error').unavailableReason(createFakeApp({ optional: false }).target)).toBe(
      'give businessErrorInput() (an input the procedure refuses with a 4xx)',
    );
    expect(checkOf('stored-error').unavailableReason(createFakeApp().target)).toBeNull();
    expect(await failure('stored-error', { optional: false })).toBe('no businessErrorInput');
  });
});

describe('transient-failure', () => {
  it('passes for 503 and 500', async () => {
    expect(await passes('transient-failure')).toBe('503, then the same key ran again: 201');
    expect(await passes('transient-failure', { faults: { transientStatus: 500 } })).toBe(
      '500, then the same key ran again: 201',
    );
  });

  it.each([
    [
      { transientStatus: 499 },
      'request during the failure: expected a 5xx, got 499 {"error":"downstream unavailable","number":1}',
    ],
    [{ replayedOnTransient: true }, 'request during the failure: must not be marked Idempotent-Replayed'],
    [{ transientBodyRepeated: true }, 'the retry returned the failure again'],
    [
      { replayedOnFirst: true },
      'the same key after the failure: expected a fresh execution, got Idempotent-Replayed: true',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('transient-failure', { faults })).toBe(detail);
  });

  it('a stored failure: found in the store, or (no store) replayed on the retry', async () => {
    expect(await failure('transient-failure', { faults: { transientStored: true } })).toMatch(
      new RegExp(
        `^after the transient failure: expected nothing stored for key ${UUID}, found a completed record$`,
      ),
    );
    expect(await failure('transient-failure', { store: false, faults: { transientStored: true } })).toBe(
      'the same key after the failure: expected a success (2xx), got 503 (Idempotent-Replayed: true) {"error":"downstream unavailable","number":1}',
    );
  });

  it('without withTransientFailure it is not available, and cannot pass if run anyway', async () => {
    expect(checkOf('transient-failure').unavailableReason(createFakeApp({ optional: false }).target)).toBe(
      'give withTransientFailure(run) (make the procedure fail with a 5xx)',
    );
    expect(checkOf('transient-failure').unavailableReason(createFakeApp().target)).toBeNull();
    expect(await failure('transient-failure', { optional: false })).toBe('no withTransientFailure');
  });
});

describe('missing-key', () => {
  it('passes', async () => {
    expect(await passes('missing-key')).toBe('400 naming Idempotency-Key, 0 executions');
  });

  it.each([
    [{ missingKeyRuns: true }, `request without the header: expected HTTP 400, got 201 ${FIRST_BODY}`],
    [
      { keyErrorsAnonymous: true },
      'request without the header: the 400 does not mention Idempotency-Key, so it is not the key being refused: {"error":"bad request"}',
    ],
    [
      { replayedOn400: true },
      'request without the header: a rejection must not be marked Idempotent-Replayed',
    ],
    [
      { executesOnRejection: true },
      'request without the header: expected 0 execution(s) of the procedure, counted 1',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('missing-key', { faults })).toBe(detail);
  });
});

describe('malformed-key', () => {
  it('passes', async () => {
    expect(await passes('malformed-key')).toBe('10 malformed values → 400 each, 0 executions');
  });

  it.each([
    [{ acceptsKey: 'abc\tdef' }, `key a tab inside: expected HTTP 400, got 201 ${FIRST_BODY}`],
    [
      { keyErrorsAnonymous: true },
      'key empty: the 400 does not mention Idempotency-Key, so it is not the key being refused: {"error":"bad request"}',
    ],
    [{ replayedOn400: true }, 'key empty: a rejection must not be marked Idempotent-Replayed'],
    [
      { executesOnRejection: true },
      '10 malformed keys: expected 0 execution(s) of the procedure, counted 10',
    ],
    [
      { storesMalformed: { value: '"abc', as: 'abc' } },
      'key an unterminated quoted string: expected nothing stored for key abc, found a processing record',
    ],
    [
      { storesMalformed: { value: '"a", "b"', as: '"a", "b"' } },
      'key a quoted list: expected nothing stored for key "a", "b", found a processing record',
    ],
    [
      { storesMalformed: { value: '"a", "b"', as: 'a", "b' } },
      'key a quoted list: expected nothing stored for key a", "b, found a processing record',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('malformed-key', { faults })).toBe(detail);
  });
});

describe('no-principal', () => {
  it('passes', async () => {
    expect(await passes('no-principal')).toBe('401, 0 executions; then principal A ran the key');
  });

  it.each([
    [{ anonymousRuns: true }, `unauthenticated request: expected HTTP 401, got 201 ${FIRST_BODY}`],
    [
      { executesOnRejection: true },
      'unauthenticated request: expected 0 execution(s) of the procedure, counted 1',
    ],
    [
      { anonymousClaims: true, oneScope: true },
      'the same key from principal A: expected a success (2xx), got 422 {"error":"Idempotency-Key reused with another request"}',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('no-principal', { faults })).toBe(detail);
  });
});

describe('invalid-input', () => {
  it('passes', async () => {
    expect(await passes('invalid-input')).toBe('400, nothing stored; the same key then ran once');
  });

  it.each([
    [{ anyInput: true }, 'invalid input: expected HTTP 400, got 201 {"number":1,"sku":"","quantity":-1}'],
    [{ replayedOn400: true }, 'invalid input: a rejection must not be marked Idempotent-Replayed'],
    [{ executesOnRejection: true }, 'invalid input: expected 0 execution(s) of the procedure, counted 1'],
    [
      { doubleExecution: true },
      'invalid then valid input: expected 1 execution(s) of the procedure, counted 2',
    ],
    [
      { replayedOnFirst: true },
      'the same key with a valid input: expected a fresh execution, got Idempotent-Replayed: true',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('invalid-input', { faults })).toBe(detail);
  });

  it('an invalid input stored: found in the store', async () => {
    expect(await failure('invalid-input', { faults: { invalidStored: true } })).toMatch(
      new RegExp(`^invalid input: expected nothing stored for key ${UUID}, found a completed record$`),
    );
  });
});

describe('unfingerprintable-input', () => {
  it('passes', async () => {
    expect(await passes('unfingerprintable-input')).toBe('400; the same key then ran');
  });

  it.each([
    [
      { surrogateFails: true },
      'input with a lone surrogate: expected HTTP 400, got 500 {"error":"Internal Server Error"}',
    ],
    [
      { replayedOn400: true },
      'input with a lone surrogate: a rejection must not be marked Idempotent-Replayed',
    ],
    [
      { executesOnRejection: true },
      'input with a lone surrogate: expected 0 execution(s) of the procedure, counted 1',
    ],
    [
      { replayedOnFirst: true },
      'the same key with a valid input: expected a fresh execution, got Idempotent-Replayed: true',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('unfingerprintable-input', { faults })).toBe(detail);
  });

  it('the input is a lone surrogate in a JSON string; one that runs, or is stored, fails', async () => {
    const { fake } = await run('unfingerprintable-input');
    expect(fake.state.requests[0]?.body).toBe('{"idemConformance":"\\ud800"}');
    expect(
      await failure('unfingerprintable-input', { faults: { surrogateRuns: true, anyInput: true } }),
    ).toMatch(/^input with a lone surrogate: expected HTTP 400, got 201 /);
    expect(await failure('unfingerprintable-input', { faults: { invalidStored: true } })).toMatch(
      new RegExp(
        `^input with a lone surrogate: expected nothing stored for key ${UUID}, found a completed record$`,
      ),
    );
  });
});

describe('batched', () => {
  it('passes for tRPC; a plain HTTP target has no batches', async () => {
    expect(await passes('batched')).toBe('400 for the batch, 0 executions; the same key alone then ran');
    expect(checkOf('batched').unavailableReason(createFakeApp({ protocol: 'http' }).target)).toBe(
      'a plain HTTP target has no batches (tRPC targets only)',
    );
    expect(checkOf('batched').unavailableReason(createFakeApp().target)).toBeNull();
  });

  it('sends one procedure twice in one batch', async () => {
    const { fake } = await run('batched');
    expect(fake.state.requests[0]?.url).toBe(
      'http://fake.test/api/trpc/shop.placeOrder,shop.placeOrder?batch=1',
    );
    expect(fake.state.requests[0]?.body).toBe(
      '{"0":{"sku":"book","quantity":1},"1":{"sku":"book","quantity":1}}',
    );
  });

  it.each([
    [{ batchRuns: true }, `batch of two: expected HTTP 400, got 201 ${FIRST_BODY}`],
    [{ replayedOn400: true }, 'batch of two: a rejection must not be marked Idempotent-Replayed'],
    [{ executesOnRejection: true }, 'batch of two: expected 0 execution(s) of the procedure, counted 1'],
    [
      { replayedOnFirst: true },
      'the same key sent alone: expected a fresh execution, got Idempotent-Replayed: true',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('batched', { faults })).toBe(detail);
  });

  it('a batch that claims its key: found in the store', async () => {
    expect(await failure('batched', { faults: { invalidStored: true } })).toMatch(
      new RegExp(`^batch of two: expected nothing stored for key ${UUID}, found a completed record$`),
    );
  });
});

describe('fingerprint', () => {
  it('passes (with or without a store to look in)', async () => {
    const passed = '422 for the different input, 1 execution, the original still replays';
    expect(await passes('fingerprint')).toBe(passed);
    expect(await passes('fingerprint', { faults: { storeForgets: true } })).toBe(passed);
  });

  it.each([
    [
      { noFingerprint: true },
      `the same key with a different input: expected HTTP 422, got 201 (Idempotent-Replayed: true) ${FIRST_BODY}`,
    ],
    [
      { replayedOn422: true },
      'the same key with a different input: a rejection must not be marked Idempotent-Replayed',
    ],
    [{ retryAfterOn422: true }, 'a 422 must not carry Retry-After: retrying it cannot help'],
    [
      { runsOn422: true },
      'first request then a different input: expected 1 execution(s) of the procedure, counted 2',
    ],
    [
      { overwritesOn422: true },
      'the 422 changed the stored record: its fingerprint is no longer the first request’s',
    ],
    [
      { deletesOn422: true },
      'the 422 changed the stored record: its fingerprint is no longer the first request’s',
    ],
    [{ replayDrops: 'etag' }, 'the original input again: ETag null differs from the first\'s "1"'],
    [{ replayedOnFirst: true }, 'first request: expected a fresh execution, got Idempotent-Replayed: true'],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('fingerprint', { faults })).toBe(detail);
  });

  it('without a store, an overwritten fingerprint shows as a 422 for the original input', async () => {
    expect(await failure('fingerprint', { store: false, faults: { overwritesOn422: true } })).toBe(
      'the original input again: expected HTTP 201, got 422 {"error":"Idempotency-Key reused with another request"}',
    );
  });
});

describe('scope', () => {
  it('passes (with or without a store)', async () => {
    expect(await passes('scope')).toBe('2 executions, each principal replays its own answer');
    expect(await passes('scope', { store: false })).toBe(
      '2 executions, each principal replays its own answer',
    );
  });

  it.each([
    [{ oneScope: true }, "principal B got a replay (of A's answer?) instead of its own execution"],
    [
      { doubleExecution: true },
      'one key from two principals: expected 2 execution(s) of the procedure, counted 4',
    ],
    [{ executesOnReplay: true }, 'after both replays: expected 2 execution(s) of the procedure, counted 4'],
    [{ replayDrops: 'location' }, "principal A again: Location null differs from the first's /orders/1"],
    [{ replaysBreakFrom: 1 }, 'principal A again: expected Idempotent-Replayed: true, got no such header'],
    [{ storeSaysProcessing: true }, 'no completed record for scope alice'],
    [{ storeForgets: true }, 'no completed record for scope alice'],
    [{ replayedOnFirst: true }, 'principal A: expected a fresh execution, got Idempotent-Replayed: true'],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('scope', { faults })).toBe(detail);
  });

  it('B’s own replay is checked too, and so is a target that gives both principals one scope', async () => {
    const bOnly = await failure('scope', {}, {}, (target) => {
      const send = target.fetch;
      if (!send) throw new Error('no fetch');
      let fromB = 0;
      return {
        ...target,
        fetch: async (url, init) => {
          const response = await send(url, init);
          if (init.headers['x-principal'] !== 'bob' || ++fromB < 2) return response;
          return new Response(await response.text(), {
            status: response.status,
            headers: { etag: '"other"' },
          });
        },
      };
    });
    expect(bOnly).toBe('principal B again: expected Idempotent-Replayed: true, got no such header');
    const bFails = await failure('scope', {}, {}, (target) => {
      const send = target.fetch;
      if (!send) throw new Error('no fetch');
      return {
        ...target,
        fetch: async (url, init) =>
          init.headers['x-principal'] === 'bob' ? new Response('down', { status: 503 }) : send(url, init),
      };
    });
    expect(bFails).toBe('principal B, same key: expected a success (2xx), got 503 down');
    const sameScope = await failure('scope', {}, {}, (target) => ({
      ...target,
      principals: [target.principals[0], { headers: target.principals[1].headers, scope: 'alice' }],
    }));
    expect(sameScope).toBe('the target gives both principals the same scope');
    // Only one scope known: the store is not consulted.
    expect(
      (
        await run('scope', { faults: { storeSaysProcessing: true } }, {}, (target) => ({
          ...target,
          principals: [target.principals[0], { headers: target.principals[1].headers }],
        }))
      ).passed,
    ).toBe(true);
    expect(
      (
        await run('scope', { faults: { storeSaysProcessing: true } }, {}, (target) => ({
          ...target,
          principals: [{ headers: target.principals[0].headers }, target.principals[1]],
        }))
      ).passed,
    ).toBe(true);
  });
});

describe('in-flight', () => {
  it('passes with a gate: 409 + Retry-After, then the replay', async () => {
    expect(await passes('in-flight')).toBe('409 + Retry-After: 1, replayed after 1 retry; 1 execution');
    expect(await passes('in-flight', { faults: { extraConflicts: 1 } })).toBe(
      '409 + Retry-After: 1, replayed after 2 retries; 1 execution',
    );
    expect(await passes('in-flight', { faults: { conflictRetryAfter: '7' } })).toBe(
      '409 + Retry-After: 7, replayed after 1 retry; 1 execution',
    );
  });

  it('with a gate, the overlap is known: an app that answers both requests within one millisecond passes', async () => {
    // The clock does not move: the duplicate leaves in the millisecond the first is answered in. The check used
    // to compare the two times here too and failed a correct app ("answered (0 ms) before its duplicate was sent").
    expect(await passes('in-flight', { onAnswer: () => {} })).toBe(
      '409 + Retry-After: 1, replayed after 1 retry; 1 execution',
    );
  });

  it('passes with a latency seam', async () => {
    expect(await passes('in-flight', { inFlight: 'slow' })).toBe(
      '409 + Retry-After: 1, replayed after 1 retry; 1 execution',
    );
  });

  it('passes when the duplicate waits for the first and replays it', async () => {
    expect(await passes('in-flight', { faults: { duplicateWaits: true } })).toBe(
      'the duplicate waited and replayed; 1 execution',
    );
  });

  it.each([
    [
      { duplicateStatus: 423 },
      'the duplicate sent while the first was in flight: expected 409 + Retry-After or a replay, got 423 {"error":"busy"}',
    ],
    [
      { conflictRetryAfter: null },
      'the 409 must carry Retry-After in whole seconds: 409 {"error":"in progress"}',
    ],
    [
      { conflictRetryAfter: '1.5' },
      'the 409 must carry Retry-After in whole seconds: 409 (Retry-After: 1.5) {"error":"in progress"}',
    ],
    [
      { extraConflicts: Number.POSITIVE_INFINITY },
      'the duplicate\'s retry after 409: expected HTTP 201, got 409 (Retry-After: 1) {"error":"in progress"}',
    ],
    [
      { extraConflicts: Number.POSITIVE_INFINITY, conflictRetryAfterAfterFirst: null },
      'a 409 must carry Retry-After in whole seconds, got 409 {"error":"in progress"}',
    ],
    [
      { replayDrops: 'location' },
      "the duplicate's retry after 409: Location null differs from the first's /orders/1",
    ],
    [{ replayedOnFirst: true }, 'first request: expected a fresh execution, got Idempotent-Replayed: true'],
    [
      { doubleExecution: true },
      'first request and its in-flight duplicate: expected 1 execution(s) of the procedure, counted 2',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('in-flight', { faults })).toBe(detail);
  });

  it('retries a 409 at most maxRetries times', async () => {
    const result = await run(
      'in-flight',
      { faults: { extraConflicts: Number.POSITIVE_INFINITY } },
      { maxRetries: 3 },
    );
    expect(result.passed).toBe(false);
    // The first, its duplicate, and 3 retries.
    expect(result.fake.state.requests).toHaveLength(5);
  });

  it('a duplicate that runs too fails (after the duplicate’s patience, the gate lets both go)', async () => {
    expect(await failure('in-flight', { faults: { duplicateRuns: true } })).toBe(
      'the duplicate sent while the first was in flight: expected 409 + Retry-After or a replay, got 201 {"number":2,"sku":"book","quantity":1}',
    );
  });

  it('the duplicate waited, and its replay is checked', async () => {
    expect(await failure('in-flight', { faults: { duplicateWaits: true, replayDrops: 'etag' } })).toBe(
      'the duplicate (waited, then replayed): ETag null differs from the first\'s "1"',
    );
  });

  it('a latency seam that does not slow anything: the check refuses to pass on no overlap', async () => {
    const detail = await failure('in-flight', {
      inFlight: 'slow-that-does-nothing',
      onAnswer: () => vi.setSystemTime(Date.now() + 3),
    });
    expect(detail).toBe(
      'the first request answered (3 ms) before its duplicate was sent: withSlowExecution did not keep it in flight',
    );
  });

  it('without a way to hold the first request it is not available, and cannot pass if run anyway', async () => {
    const none = createFakeApp({ inFlight: 'none' }).target;
    expect(checkOf('in-flight').unavailableReason(none)).toBe(
      'give withHeldExecutions(run) or withSlowExecution(run) (keep the first request in flight)',
    );
    expect(checkOf('in-flight').unavailableReason(createFakeApp({ inFlight: 'slow' }).target)).toBeNull();
    expect(await failure('in-flight', { inFlight: 'none' })).toBe(
      'no withHeldExecutions or withSlowExecution',
    );
  });
});

describe('in-flight-cap', () => {
  it('passes with a gate, with a latency seam and a store, with a latency seam alone', async () => {
    const passed = '2 keys in flight → key 3: 429 + Retry-After: 1; it ran later';
    expect(await passes('in-flight-cap', { cap: 2 })).toBe(passed);
    expect(await passes('in-flight-cap', { cap: 2, inFlight: 'slow' })).toBe(passed);
    expect(await passes('in-flight-cap', { cap: 2, inFlight: 'slow', store: false })).toBe(passed);
    expect(await passes('in-flight-cap', { cap: 3, faults: { capRetryAfter: '12' } })).toBe(
      '3 keys in flight → key 4: 429 + Retry-After: 12; it ran later',
    );
  });

  it.each([
    [{ noCap: true }, 'key 3 started executing while 2 keys were in flight'],
    [
      { capStatus: 503 },
      'key 3 while 2 are in flight: expected HTTP 429, got 503 (Retry-After: 1) {"error":"too many in flight"}',
    ],
    [
      { capRetryAfter: null },
      'the 429 must carry Retry-After in whole seconds: 429 {"error":"too many in flight"}',
    ],
    [
      { capRetryAfter: 'soon' },
      'the 429 must carry Retry-After in whole seconds: 429 (Retry-After: soon) {"error":"too many in flight"}',
    ],
    [
      { capRetryAfter: 'x1' },
      'the 429 must carry Retry-After in whole seconds: 429 (Retry-After: x1) {"error":"too many in flight"}',
    ],
    [
      { capRetryAfter: '1x' },
      'the 429 must carry Retry-After in whole seconds: 429 (Retry-After: 1x) {"error":"too many in flight"}',
    ],
    [{ replayedOn429: true }, 'the 429 must not be marked Idempotent-Replayed'],
    [{ retryAfterOnSuccess: true }, 'key 1 of 2 (within the cap): a success must not carry Retry-After (1)'],
    [
      { refusedStaysRefused: true },
      'the refused key once the others finished: expected a success (2xx), got 429 (Retry-After: 1) {"error":"too many in flight"}',
    ],
    [
      { doubleExecution: true },
      '2 keys, then the refused one again: expected 3 execution(s) of the procedure, counted 6',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('in-flight-cap', { cap: 2, faults })).toBe(detail);
  });

  it('a refused key that was claimed anyway: found in the store', async () => {
    expect(await failure('in-flight-cap', { cap: 2, faults: { claimsOn429: true } })).toMatch(
      new RegExp(`^the refused key: expected nothing stored for key ${UUID}, found a processing record$`),
    );
  });

  it('availability: the cap, and a way to hold requests', async () => {
    const check = checkOf('in-flight-cap');
    expect(check.unavailableReason(createFakeApp().target)).toBe(
      'give inFlightCap (the procedure’s maxInFlightPerScope, external mode)',
    );
    expect(check.unavailableReason(createFakeApp({ cap: 2, inFlight: 'none' }).target)).toBe(
      'give withHeldExecutions(run) or withSlowExecution(run) as well (the first keys must stay in flight)',
    );
    expect(check.unavailableReason(createFakeApp({ cap: 2, inFlight: 'slow' }).target)).toBeNull();
    expect(check.unavailableReason(createFakeApp({ cap: 2 }).target)).toBeNull();
    expect(await failure('in-flight-cap', {})).toBe('no inFlightCap');
    expect(await failure('in-flight-cap', { cap: 2, inFlight: 'none' })).toBe(
      'no withHeldExecutions or withSlowExecution',
    );
  });
});

describe('a seam that never holds anything (fake timers: the kit’s own deadlines pass in no time)', () => {
  /** A gate that never sees an execution arrive. */
  const emptyGate = (target: ConformanceTarget<Order>): ConformanceTarget<Order> => ({
    ...target,
    withHeldExecutions: (run) => run({ reached: () => new Promise<void>(() => {}), release: async () => {} }),
  });

  it('in-flight: the first request never reaches the gate → fails after 30 s', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const pending = run('in-flight', {}, {}, emptyGate);
    await vi.advanceTimersByTimeAsync(29_999);
    let settled = false;
    void pending.then(() => {
      settled = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const result = await pending;
    expect(result.detail).toBe("the first request did not reach withHeldExecutions' gate within 30 s");
  });

  it('in-flight-cap: the requests within the cap never reach the gate → fails after 30 s', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const pending = run('in-flight-cap', { cap: 3 }, {}, emptyGate);
    await vi.advanceTimersByTimeAsync(30_000);
    expect((await pending).detail).toBe(
      "3 requests with new keys did not reach withHeldExecutions' gate within 30 s",
    );
  });

  it('in-flight-cap with a latency seam and a store that never shows the keys → fails after 10 s', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const pending = run('in-flight-cap', { cap: 2, inFlight: 'slow', faults: { storeForgets: true } });
    let settled = false;
    void pending.then(() => {
      settled = true;
    });
    // Polled every 25 ms: at exactly 10 s it is not yet past the deadline; the next poll is.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(25);
    expect((await pending).detail).toBe('only 0 of 2 keys were claimed after 10 s');
  });

  it('in-flight-cap with a latency seam: every key must be claimed, not one of them', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const pending = run('in-flight-cap', { cap: 2, inFlight: 'slow', faults: { storeShowsAtMost: 1 } });
    await vi.advanceTimersByTimeAsync(10_025);
    expect((await pending).detail).toBe('only 1 of 2 keys were claimed after 10 s');
  });
});

describe('requests left running in the background', () => {
  it('a first request that fails while the check waits at the gate is no unhandled rejection', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', record);
    try {
      const pending = run('in-flight', {}, {}, (target) => ({
        ...target,
        fetch: async () => {
          throw new Error('connection refused');
        },
        withHeldExecutions: (run) =>
          run({ reached: () => new Promise<void>(() => {}), release: async () => {} }),
      }));
      await vi.advanceTimersByTimeAsync(30_000);
      expect((await pending).detail).toBe(
        "the first request did not reach withHeldExecutions' gate within 30 s",
      );
      // Node reports an unhandled rejection once the task that left it unhandled is over.
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', record);
    }
  });
});

describe('concurrency', () => {
  it('passes: one fresh answer, the others 409 and then replays (or replays at once)', async () => {
    expect(await passes('concurrency', {}, { concurrency: 5 })).toBe(
      '5 parallel: 1 × fresh 2xx, 0 × replay, 4 × 409, 0 × other; every 409 replayed after ≤ 1 retry; 1 execution',
    );
    expect(await passes('concurrency', { faults: { extraConflicts: 1 } }, { concurrency: 3 })).toBe(
      '3 parallel: 1 × fresh 2xx, 0 × replay, 2 × 409, 0 × other; every 409 replayed after ≤ 2 retries; 1 execution',
    );
    expect(await passes('concurrency', { faults: { duplicateWaits: true } }, { concurrency: 4 })).toBe(
      '4 parallel: 1 × fresh 2xx, 3 × replay, 0 × 409, 0 × other; 1 execution',
    );
  });

  it('uses 20 requests by default', async () => {
    expect(await passes('concurrency', {}, {})).toMatch(/^20 parallel: 1 × fresh 2xx, 0 × replay, 19 × 409/);
  });

  it.each([
    [
      { unprotected: true },
      '4 parallel requests with one key: expected 1 execution, counted 4 (4 × fresh 2xx, 0 × replay, 0 × 409, 0 × other)',
    ],
    [
      { duplicateStatus: 423 },
      'unexpected answers (1 × fresh 2xx, 0 × replay, 0 × 409, 3 × other): 423 {"error":"busy"} | 423 {"error":"busy"} | 423 {"error":"busy"}',
    ],
    [
      { replayedOnFirst: true },
      'expected exactly one fresh 2xx (0 × fresh 2xx, 1 × replay, 3 × 409, 0 × other)',
    ],
    [
      { conflictRetryAfter: null },
      'a 409 must carry Retry-After in whole seconds: 409 {"error":"in progress"}',
    ],
    [{ replayDrops: 'location' }, "a 409 retried: Location null differs from the first's /orders/1"],
    [
      { duplicateWaits: true, replayDrops: 'etag' },
      'a parallel duplicate: ETag null differs from the first\'s "1"',
    ],
    [
      { executesOnReplay: true },
      '4 parallel requests and the retries of their 409s: expected 1 execution(s) of the procedure, counted 4',
    ],
  ] as const)('fails for %j', async (faults, detail) => {
    expect(await failure('concurrency', { faults }, { concurrency: 4 })).toBe(detail);
  });

  it('duplicates that answer like a first execution (no Idempotent-Replayed) without running: more than one fresh answer', async () => {
    expect(
      await failure(
        'concurrency',
        { faults: { duplicateWaits: true, noReplayedHeader: true } },
        { concurrency: 4 },
      ),
    ).toBe('expected exactly one fresh 2xx (4 × fresh 2xx, 0 × replay, 0 × 409, 0 × other)');
  });

  it('only three of the unexpected answers are shown', async () => {
    expect(await failure('concurrency', { faults: { duplicateStatus: 423 } }, { concurrency: 6 })).toBe(
      'unexpected answers (1 × fresh 2xx, 0 × replay, 0 × 409, 5 × other): 423 {"error":"busy"} | 423 {"error":"busy"} | 423 {"error":"busy"}',
    );
  });
});
