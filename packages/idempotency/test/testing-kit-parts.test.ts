/**
 * The conformance kit's parts below the checks (`./testing`): the client (the requests it builds and what it
 * keeps of each answer), the assertions every check shares, the in-process gate, the runner and its report,
 * and the options' defaults. In-process: a recording `fetch`, fake clocks where time is part of the answer.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ConformanceFailure,
  expectExecutions,
  expectFresh,
  expectNothingStored,
  expectRejected,
  expectReplayOf,
  expectStatus,
  retryWhileConflict,
} from '../src/testing/check.ts';
import {
  createConformanceClient,
  describeSent,
  isConflict,
  isFresh,
  isReplay,
  isSuccess,
  type Sent,
} from '../src/testing/client.ts';
import {
  type ConformanceCheck,
  type ConformanceReport,
  type ConformanceTarget,
  conformanceChecks,
  createInProcessGate,
  formatConformanceReport,
  planConformance,
  registerIdempotencyConformance,
  runConformanceCheck,
  runIdempotencyConformance,
} from '../src/testing/index.ts';
import { resolveConformanceOptions } from '../src/testing/target.ts';
import { createFakeApp } from './support/fake-conformance-app.ts';

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

function sent(overrides: Partial<Sent> = {}): Sent {
  return {
    status: 201,
    replayed: null,
    retryAfter: null,
    contentType: 'application/json',
    location: '/orders/1',
    etag: '"1"',
    body: '{"ok":true}',
    sentAt: 0,
    receivedAt: 0,
    ...overrides,
  };
}

function failureOf(assertion: () => unknown): string {
  try {
    assertion();
  } catch (error) {
    expect(error).toBeInstanceOf(ConformanceFailure);
    expect((error as Error).name).toBe('ConformanceFailure');
    return (error as Error).message;
  }
  throw new Error('did not fail');
}

describe('the client', () => {
  function recording(target: Partial<ConformanceTarget<unknown>> = {}) {
    const requests: Array<{
      url: string;
      init: { method: string; headers: Record<string, string>; body: string };
    }> = [];
    const fake = createFakeApp();
    const client = createConformanceClient({
      ...fake.target,
      fetch: async (url, init) => {
        requests.push({ url, init });
        return new Response('{"a":1}', {
          status: 201,
          headers: {
            'idempotent-replayed': 'true',
            'retry-after': '3',
            'content-type': 'text/x',
            location: '/l',
            etag: '"e"',
          },
        });
      },
      ...target,
    } as ConformanceTarget<unknown>);
    return { client, requests };
  }

  it('tRPC: POSTs to the endpoint (its trailing slashes dropped) plus the procedure, the input as JSON, the key', async () => {
    const { client, requests } = recording({ url: 'http://x.test/trpc//' });
    await client.post({ key: 'k1', input: { a: 1 } });
    expect(requests).toEqual([
      {
        url: 'http://x.test/trpc/shop.placeOrder',
        init: {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-principal': 'alice', 'Idempotency-Key': 'k1' },
          body: '{"a":1}',
        },
      },
    ]);
  });

  it('a batch: the procedure twice in the path and the body', async () => {
    const { client, requests } = recording({ url: 'http://x.test/trpc' });
    await client.post({ key: 'k', rawBody: '{"b":2}', batched: true });
    expect(requests[0]?.url).toBe('http://x.test/trpc/shop.placeOrder,shop.placeOrder?batch=1');
    expect(requests[0]?.init.body).toBe('{"0":{"b":2},"1":{"b":2}}');
  });

  it('plain HTTP: POSTs to the URL as given; no batches', async () => {
    const { client, requests } = recording({ protocol: 'http', url: 'http://x.test/orders/' });
    await client.post({ key: 'k', input: [1] });
    expect(requests[0]?.url).toBe('http://x.test/orders/');
    await expect(client.post({ key: 'k', input: 1, batched: true })).rejects.toThrow(
      'a plain HTTP target has no batches',
    );
    expect(requests).toHaveLength(1);
  });

  it('headers: the target’s over the JSON content type, the sender’s over both; no key, no key header', async () => {
    const { client, requests } = recording({
      headers: { 'content-type': 'application/vnd+json', 'x-tenant': 't', 'x-principal': 'overridden' },
      unauthenticatedHeaders: { 'x-anonymous': '1' },
    });
    await client.post({ key: null, input: 1, from: 1 });
    await client.post({ key: null, input: 1, from: 'anonymous' });
    expect(requests.map((request) => request.init.headers)).toEqual([
      { 'content-type': 'application/vnd+json', 'x-tenant': 't', 'x-principal': 'bob' },
      {
        'content-type': 'application/vnd+json',
        'x-tenant': 't',
        'x-principal': 'overridden',
        'x-anonymous': '1',
      },
    ]);
  });

  it('the body: serialized by the target’s transformer; undefined is null; rawBody as given', async () => {
    const { client, requests } = recording({ serialize: (input: unknown) => ({ json: input }) });
    await client.post({ key: 'k', input: { a: 1 } });
    await client.post({ key: 'k', rawBody: ' raw ' });
    expect(requests.map((request) => request.init.body)).toEqual(['{"json":{"a":1}}', ' raw ']);
    expect(client.wireBody(undefined)).toBe('{}');
    expect(recording().client.wireBody(undefined)).toBe('null');
    expect(client.principal(1)).toEqual({ headers: { 'x-principal': 'bob' }, scope: 'bob' });
  });

  it('keeps the status, the idempotency headers, the replayed ones, the body text and the clock around the request', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000);
    const fake = createFakeApp();
    const client = createConformanceClient({
      ...fake.target,
      fetch: async () => {
        vi.setSystemTime(1_250);
        return new Response('{"a":1}', {
          status: 202,
          headers: {
            'Idempotent-Replayed': 'true',
            'Retry-After': '3',
            'Content-Type': 'text/x',
            Location: '/l',
            ETag: '"e"',
          },
        });
      },
    });
    expect(await client.post({ key: 'k', input: 1 })).toEqual({
      status: 202,
      replayed: 'true',
      retryAfter: '3',
      contentType: 'text/x',
      location: '/l',
      etag: '"e"',
      body: '{"a":1}',
      sentAt: 1_000,
      receivedAt: 1_250,
    });
  });

  it('without a fetch of the target’s: the global fetch', async () => {
    const calls: string[] = [];
    vi.stubGlobal('fetch', async (url: string) => {
      calls.push(url);
      return new Response('ok');
    });
    const { fetch: _omitted, ...target } = createFakeApp({ protocol: 'http' }).target;
    expect((await createConformanceClient(target).post({ key: 'k', input: 1 })).body).toBe('ok');
    expect(calls).toEqual(['http://fake.test/api/orders']);
  });
});

describe('describeSent and the answer predicates', () => {
  it('status, the idempotency headers present, the body (cut at 160 characters)', () => {
    expect(describeSent(sent())).toBe('201 {"ok":true}');
    expect(describeSent(sent({ replayed: 'true' }))).toBe('201 (Idempotent-Replayed: true) {"ok":true}');
    expect(describeSent(sent({ retryAfter: '2' }))).toBe('201 (Retry-After: 2) {"ok":true}');
    expect(describeSent(sent({ replayed: 'true', retryAfter: '2', body: '' }))).toBe(
      '201 (Idempotent-Replayed: true, Retry-After: 2) ',
    );
    expect(describeSent(sent({ body: 'x'.repeat(160) }))).toBe(`201 ${'x'.repeat(160)}`);
    expect(describeSent(sent({ body: `${'x'.repeat(160)}yz` }))).toBe(`201 ${'x'.repeat(160)}…`);
  });

  it('isSuccess: 2xx; isFresh: 2xx not replayed; isReplay: Idempotent-Replayed: true; isConflict: 409 + whole seconds', () => {
    expect([199, 200, 299, 300].map((status) => isSuccess(sent({ status })))).toEqual([
      false,
      true,
      true,
      false,
    ]);
    expect(isFresh(sent())).toBe(true);
    expect(isFresh(sent({ replayed: 'true' }))).toBe(false);
    expect(isFresh(sent({ status: 409 }))).toBe(false);
    expect(isReplay(sent({ replayed: 'true' }))).toBe(true);
    expect(isReplay(sent({ replayed: 'TRUE' }))).toBe(false);
    expect(isReplay(sent())).toBe(false);
    expect(isConflict(sent({ status: 409, retryAfter: '0' }))).toBe(true);
    expect(isConflict(sent({ status: 409, retryAfter: '12' }))).toBe(true);
    for (const retryAfter of [null, '', '1.5', ' 1', '1 ', 'x1', '1x'])
      expect(isConflict(sent({ status: 409, retryAfter })), String(retryAfter)).toBe(false);
    expect(isConflict(sent({ status: 429, retryAfter: '1' }))).toBe(false);
  });
});

describe('the shared assertions', () => {
  it('expectStatus', () => {
    expect(() => expectStatus(sent(), 201, 'x')).not.toThrow();
    expect(failureOf(() => expectStatus(sent(), 200, 'what'))).toBe(
      'what: expected HTTP 200, got 201 {"ok":true}',
    );
  });

  it('expectFresh', () => {
    expect(() => expectFresh(sent(), 'x')).not.toThrow();
    expect(failureOf(() => expectFresh(sent({ status: 409 }), 'w'))).toBe(
      'w: expected a success (2xx), got 409 {"ok":true}',
    );
    expect(failureOf(() => expectFresh(sent({ replayed: 'false' }), 'w'))).toBe(
      'w: expected a fresh execution, got Idempotent-Replayed: false',
    );
    expect(failureOf(() => expectFresh(sent({ retryAfter: '0' }), 'w'))).toBe(
      'w: a success must not carry Retry-After (0)',
    );
  });

  it('expectReplayOf: status, header, body, and each replayed header', () => {
    const original = sent();
    const replay = sent({ replayed: 'true' });
    expect(() => expectReplayOf(replay, original, 'x')).not.toThrow();
    expect(failureOf(() => expectReplayOf(sent({ replayed: 'true', status: 200 }), original, 'w'))).toMatch(
      /^w: expected HTTP 201, got 200 /,
    );
    expect(failureOf(() => expectReplayOf(sent(), original, 'w'))).toBe(
      'w: expected Idempotent-Replayed: true, got no such header',
    );
    expect(failureOf(() => expectReplayOf(sent({ replayed: '1' }), original, 'w'))).toBe(
      'w: expected Idempotent-Replayed: true, got 1',
    );
    expect(failureOf(() => expectReplayOf({ ...replay, body: 'b' }, original, 'w'))).toBe(
      'w: the replayed body differs from the first.\n  first:  {"ok":true}\n  replay: b',
    );
    expect(failureOf(() => expectReplayOf({ ...replay, contentType: 'text/plain' }, original, 'w'))).toBe(
      "w: Content-Type text/plain differs from the first's application/json",
    );
    expect(failureOf(() => expectReplayOf({ ...replay, location: null }, original, 'w'))).toBe(
      "w: Location null differs from the first's /orders/1",
    );
    expect(failureOf(() => expectReplayOf({ ...replay, etag: '"2"' }, original, 'w'))).toBe(
      'w: ETag "2" differs from the first\'s "1"',
    );
  });

  it('expectRejected', () => {
    expect(() => expectRejected(sent({ status: 400 }), 400, 'x')).not.toThrow();
    expect(failureOf(() => expectRejected(sent(), 400, 'w'))).toBe(
      'w: expected HTTP 400, got 201 {"ok":true}',
    );
    expect(failureOf(() => expectRejected(sent({ status: 400, replayed: 'true' }), 400, 'w'))).toBe(
      'w: a rejection must not be marked Idempotent-Replayed',
    );
  });

  it('expectExecutions and expectNothingStored read the target', async () => {
    const fake = createFakeApp();
    const context = {
      target: fake.target,
      client: createConformanceClient(fake.target),
      options: resolveConformanceOptions(),
      newKey: () => 'k',
      executionsSinceStart: async () => 3,
    };
    await expect(expectExecutions(context, 3, 'w')).resolves.toBeUndefined();
    await expect(expectExecutions(context, 2, 'w')).rejects.toThrow(
      'w: expected 2 execution(s) of the procedure, counted 3',
    );
    await expect(expectNothingStored(context, 'k', 'w')).resolves.toBeUndefined();
    await context.client.post({ key: 'k', input: fake.target.input() });
    await expect(expectNothingStored(context, 'k', 'w')).rejects.toThrow(
      'w: expected nothing stored for key k, found a completed record',
    );
    // Not looked up without a store, or without principal A's scope.
    const { store: _store, ...noStore } = fake.target;
    await expect(expectNothingStored({ ...context, target: noStore }, 'k', 'w')).resolves.toBeUndefined();
    const noScope = { ...fake.target, principals: [{ headers: {} }, fake.target.principals[1]] as const };
    await expect(
      expectNothingStored({ ...context, client: createConformanceClient(noScope) }, 'k', 'w'),
    ).resolves.toBeUndefined();
  });
});

describe('retryWhileConflict', () => {
  const options = (overrides: Partial<ReturnType<typeof resolveConformanceOptions>> = {}) => ({
    ...resolveConformanceOptions(),
    maxRetryWaitMs: 0,
    ...overrides,
  });
  const conflict = sent({ status: 409, retryAfter: '1' });

  it('anything but a 409: returned as is, nothing resent', async () => {
    const resend = vi.fn(async () => sent());
    expect(await retryWhileConflict(sent({ status: 422 }), resend, options())).toEqual({
      final: sent({ status: 422 }),
      retries: 0,
    });
    expect(resend).not.toHaveBeenCalled();
  });

  it('resends until the answer is not a 409, at most maxRetries times', async () => {
    const answers = [conflict, conflict, sent({ replayed: 'true' })];
    const resend = vi.fn(async () => answers.shift() ?? sent());
    expect(await retryWhileConflict(conflict, resend, options())).toEqual({
      final: sent({ replayed: 'true' }),
      retries: 3,
    });
    const always = vi.fn(async () => conflict);
    expect(await retryWhileConflict(conflict, always, options({ maxRetries: 2 }))).toEqual({
      final: conflict,
      retries: 2,
    });
    expect(always).toHaveBeenCalledTimes(2);
    const never = vi.fn(async () => conflict);
    expect((await retryWhileConflict(conflict, never, options({ maxRetries: 0 }))).retries).toBe(0);
    expect(never).not.toHaveBeenCalled();
  });

  it('a 409 without Retry-After in whole seconds fails', async () => {
    await expect(
      retryWhileConflict(sent({ status: 409, retryAfter: '1.5' }), async () => sent(), options()),
    ).rejects.toThrow(
      'a 409 must carry Retry-After in whole seconds, got 409 (Retry-After: 1.5) {"ok":true}',
    );
  });

  it('waits Retry-After seconds, capped by maxRetryWaitMs (a fake clock)', async () => {
    vi.useFakeTimers();
    const resend = vi.fn(async () => sent());
    const capped = retryWhileConflict(
      sent({ status: 409, retryAfter: '5' }),
      resend,
      options({ maxRetryWaitMs: 2_000 }),
    );
    await vi.advanceTimersByTimeAsync(1_999);
    expect(resend).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(resend).toHaveBeenCalledTimes(1);
    await capped;

    const short = vi.fn(async () => sent());
    const honoured = retryWhileConflict(
      sent({ status: 409, retryAfter: '1' }),
      short,
      options({ maxRetryWaitMs: 60_000 }),
    );
    await vi.advanceTimersByTimeAsync(999);
    expect(short).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(short).toHaveBeenCalledTimes(1);
    await honoured;
  });
});

describe('the in-process gate', () => {
  it('outside holdWhile, pass() goes on at once', async () => {
    const gate = createInProcessGate();
    await expect(gate.pass()).resolves.toBeUndefined();
  });

  it('inside: executions wait at the gate; reached(n) once n wait; release() lets them all go', async () => {
    const gate = createInProcessGate();
    const passed: number[] = [];
    const events: string[] = [];
    const result = await gate.holdWhile(async (held) => {
      const reachedTwo = held.reached(2).then(() => events.push('reached 2'));
      const reachedOne = held.reached(1).then(() => events.push('reached 1'));
      const first = gate.pass().then(() => passed.push(1));
      await reachedOne;
      expect(events).toEqual(['reached 1']);
      const second = gate.pass().then(() => passed.push(2));
      await reachedTwo;
      expect(events).toEqual(['reached 1', 'reached 2']);
      // Already reached: resolves at once.
      await held.reached(2);
      await Promise.resolve();
      expect(passed).toEqual([]);
      await held.release();
      await Promise.all([first, second]);
      expect(passed).toEqual([1, 2]);
      // After release, executions pass at once.
      await gate.pass();
      return 'done';
    });
    expect(result).toBe('done');
  });

  it('lets the waiting executions go when holdWhile ends, even by an error', async () => {
    const gate = createInProcessGate();
    let waiting: Promise<void> | undefined;
    await expect(
      gate.holdWhile(async (held) => {
        waiting = gate.pass();
        await held.reached(1);
        throw new Error('check failed');
      }),
    ).rejects.toThrow('check failed');
    await expect(waiting).resolves.toBeUndefined();
    await expect(gate.pass()).resolves.toBeUndefined();
  });
});

describe('the runner', () => {
  const passing: ConformanceCheck = {
    id: 'replay',
    title: 'passes',
    unavailableReason: () => null,
    run: async (context) =>
      `${await context.executionsSinceStart()} since the start, key ${context.newKey()}`,
  };

  it('runConformanceCheck: the check’s account, executions counted from its start, a new UUID per key', async () => {
    const fake = createFakeApp();
    fake.state.executions = 5;
    const result = await runConformanceCheck(
      {
        ...passing,
        run: async (context) => {
          fake.state.executions += 2;
          return `${await context.executionsSinceStart()} since the start, key ${context.newKey()}, ${context.options.concurrency}`;
        },
      },
      fake.target,
      { concurrency: 3 },
    );
    expect(result).toMatchObject({ id: 'replay', title: 'passes', passed: true });
    expect(result.detail).toMatch(/^2 since the start, key [0-9a-f-]{36}, 3$/);
    expect(Number.isInteger(result.durationMs)).toBe(true);
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    expect(result.durationMs).toBeLessThan(60_000);
  });

  it('durationMs: the time the check took, rounded (a fake performance clock)', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    vi.advanceTimersByTime(1_000);
    const result = await runConformanceCheck(
      {
        ...passing,
        run: async () => {
          vi.advanceTimersByTime(5.4);
          return 'ok';
        },
      },
      createFakeApp().target,
    );
    expect(result.durationMs).toBe(5);
  });

  it('a failure is its detail; any other error is "could not run" with its message; nothing throws', async () => {
    const target = createFakeApp().target;
    const failing = { ...passing, run: async () => Promise.reject(new ConformanceFailure('it broke')) };
    expect(await runConformanceCheck(failing, target)).toMatchObject({ passed: false, detail: 'it broke' });
    const crashing = { ...passing, run: async () => Promise.reject(new Error('socket hang up')) };
    expect(await runConformanceCheck(crashing, target)).toMatchObject({
      passed: false,
      detail: 'the check could not run: socket hang up',
    });
    const throwingString = { ...passing, run: async () => Promise.reject('plain') };
    expect((await runConformanceCheck(throwingString, target)).detail).toBe('the check could not run: plain');
    const noCounter = { ...target, executions: () => Promise.reject(new Error('no counter')) };
    expect((await runConformanceCheck(passing, noCounter)).detail).toBe(
      'the check could not run: no counter',
    );
  });

  it('planConformance: every check in order, or only the named ones; the unavailable apart with their reason', () => {
    const target = createFakeApp({ inFlight: 'none', optional: false }).target;
    const all = planConformance(target);
    expect(all.checks.map((check) => check.id)).toEqual([
      'first-request',
      'replay',
      'replay-canonical-input',
      'key-sf-string',
      'missing-key',
      'malformed-key',
      'no-principal',
      'invalid-input',
      'unfingerprintable-input',
      'batched',
      'fingerprint',
      'concurrency',
      'scope',
    ]);
    expect(all.notCovered).toEqual([
      {
        id: 'stored-error',
        title: 'a deterministic business error (4xx) is stored: the same key replays it byte-identically',
        reason: 'give businessErrorInput() (an input the procedure refuses with a 4xx)',
      },
      {
        id: 'transient-failure',
        title: 'a transient failure (5xx) is not stored: the same key then runs again',
        reason: 'give withTransientFailure(run) (make the procedure fail with a 5xx)',
      },
      {
        id: 'in-flight',
        title:
          'same key while the first is still running → 409 + Retry-After (or a wait and a replay), never a second run',
        reason: 'give withHeldExecutions(run) or withSlowExecution(run) (keep the first request in flight)',
      },
      {
        id: 'in-flight-cap',
        title:
          'a NEW key while the principal has maxInFlightPerScope keys in flight → 429 + Retry-After, nothing stored',
        reason: 'give inFlightCap (the procedure’s maxInFlightPerScope, external mode)',
      },
    ]);
    const some = planConformance(target, ['scope', 'stored-error', 'replay']);
    expect(some.checks.map((check) => check.id)).toEqual(['replay', 'scope']);
    expect(some.notCovered.map((skipped) => skipped.id)).toEqual(['stored-error']);
  });

  it('every check’s title', () => {
    expect(Object.fromEntries(conformanceChecks.map((check) => [check.id, check.title]))).toEqual({
      'first-request':
        'first request with a new key → 2xx (tRPC: 200), executed once, not marked as a replay',
      replay: 'same key + same input → the stored answer, byte-identical, with Idempotent-Replayed: true',
      'replay-canonical-input':
        'same key + the same input with its JSON keys reordered and re-spaced → replay (canonical JSON)',
      'key-sf-string': 'the key as a quoted sf-string ("<key>") is the same key as the bare value → replay',
      'stored-error':
        'a deterministic business error (4xx) is stored: the same key replays it byte-identically',
      'transient-failure': 'a transient failure (5xx) is not stored: the same key then runs again',
      'missing-key': 'no Idempotency-Key header → 400, nothing executed',
      'malformed-key':
        'a malformed Idempotency-Key (empty, too long, non-printable, a list, bad quoting) → 400, nothing executed',
      'no-principal':
        'no principal → 401, nothing executed or stored (the same key then runs for a real principal)',
      'invalid-input':
        'input that fails validation → 400, not stored: the same key with a valid input then runs',
      'unfingerprintable-input':
        'input that cannot be fingerprinted (a lone surrogate) → 400, never a 5xx; nothing stored',
      batched: 'the idempotent mutation in a batch of two → 400, nothing executed or stored',
      fingerprint: 'same key + a different input → 422, nothing executed, the stored answer untouched',
      'in-flight':
        'same key while the first is still running → 409 + Retry-After (or a wait and a replay), never a second run',
      'in-flight-cap':
        'a NEW key while the principal has maxInFlightPerScope keys in flight → 429 + Retry-After, nothing stored',
      concurrency:
        'N parallel requests with one key → exactly 1 execution; every other answer is the replay, or a 409 that becomes it',
      scope: 'the same key from two principals → two executions; each replays only its own answer',
    });
  });

  it('runIdempotencyConformance: the checks in order, passed only when every one passed; the report as text', async () => {
    const good = await runIdempotencyConformance(createFakeApp({ cap: 2 }).target, {
      only: ['first-request', 'missing-key', 'stored-error'],
      maxRetryWaitMs: 1,
    });
    expect(good.procedure).toBe('shop.placeOrder');
    expect(good.passed).toBe(true);
    expect(good.results.map((result) => [result.id, result.passed])).toEqual([
      ['first-request', true],
      ['stored-error', true],
      ['missing-key', true],
    ]);
    const bad = await runIdempotencyConformance(
      createFakeApp({ faults: { missingKeyRuns: true }, optional: false }).target,
      { only: ['first-request', 'missing-key', 'stored-error'] },
    );
    expect(bad.passed).toBe(false);
    expect(bad.results.map((result) => [result.id, result.passed])).toEqual([
      ['first-request', true],
      ['missing-key', false],
    ]);
    expect(bad.notCovered.map((skipped) => skipped.id)).toEqual(['stored-error']);
  });

  it('formatConformanceReport: a line per check (multi-line details indented), then what was not covered', () => {
    const report: ConformanceReport = {
      procedure: 'orders.create',
      passed: false,
      results: [
        { id: 'replay', title: 't', passed: true, detail: 'fine', durationMs: 12 },
        { id: 'scope', title: 't', passed: false, detail: 'line one\nline two\nline three', durationMs: 3 },
      ],
      notCovered: [{ id: 'batched', title: 't', reason: 'no batches' }],
    };
    expect(formatConformanceReport(report)).toBe(
      [
        'Idempotency conformance of orders.create: FAILED',
        '  pass  replay (12 ms): fine',
        '  FAIL  scope (3 ms): line one',
        '        line two',
        '        line three',
        '  ----  batched: not covered — no batches',
      ].join('\n'),
    );
    expect(formatConformanceReport({ ...report, passed: true, results: [], notCovered: [] })).toBe(
      'Idempotency conformance of orders.create: PASSED',
    );
  });
});

describe('registerIdempotencyConformance', () => {
  function register(
    target: ConformanceTarget<unknown>,
    options: Parameters<typeof registerIdempotencyConformance>[2],
  ) {
    const suites: string[] = [];
    const tests: Array<{ name: string; body: () => Promise<void>; timeoutMs: number | undefined }> = [];
    registerIdempotencyConformance(
      target,
      {
        describe: (name, body) => {
          suites.push(name);
          body();
        },
        it: (name, body, timeoutMs) => {
          tests.push({ name, body, timeoutMs });
        },
      },
      options,
    );
    return { suites, tests };
  }

  it('one describe named after the procedure, one test per applicable check named "<id>: <title>", 60 s each', async () => {
    const { suites, tests } = register(
      createFakeApp({ inFlight: 'none', optional: false }).target as never,
      undefined,
    );
    expect(suites).toEqual(['idempotency conformance: shop.placeOrder']);
    expect(tests).toHaveLength(13);
    expect(tests[0]?.name).toBe(
      'first-request: first request with a new key → 2xx (tRPC: 200), executed once, not marked as a replay',
    );
    expect(tests.every((test) => test.timeoutMs === 60_000)).toBe(true);
    await expect(tests[0]?.body()).resolves.toBeUndefined();
  });

  it('its name, timeout, selection and options; a failing check’s test throws "<id>: <detail>"; onResult sees each', async () => {
    const results: string[] = [];
    const { suites, tests } = register(createFakeApp({ faults: { missingKeyRuns: true } }).target as never, {
      name: 'orders',
      timeoutMs: 5,
      only: ['missing-key', 'concurrency'],
      concurrency: 2,
      onResult: (result) => results.push(`${result.id} ${result.passed}`),
    });
    expect(suites).toEqual(['orders']);
    expect(tests.map((test) => [test.name.split(':')[0], test.timeoutMs])).toEqual([
      ['missing-key', 5],
      ['concurrency', 5],
    ]);
    await expect(tests[0]?.body()).rejects.toThrow(
      'missing-key: request without the header: expected HTTP 400, got 201 {"number":1,"sku":"book","quantity":1}',
    );
    await tests[1]?.body();
    expect(results).toEqual(['missing-key false', 'concurrency true']);
  });
});

describe('the options', () => {
  it('defaults, and each one overridden', () => {
    expect(resolveConformanceOptions()).toEqual({
      concurrency: 20,
      maxRetries: 10,
      maxRetryWaitMs: 2_000,
      inFlightProbeDelayMs: 200,
      capSettleMs: 500,
    });
    const given = {
      concurrency: 1,
      maxRetries: 2,
      maxRetryWaitMs: 3,
      inFlightProbeDelayMs: 4,
      capSettleMs: 5,
    };
    expect(resolveConformanceOptions(given)).toEqual(given);
    expect(resolveConformanceOptions({ maxRetries: 0 })).toMatchObject({ maxRetries: 0, concurrency: 20 });
  });
});
