/**
 * A small idempotent app that lives in the test's process, for testing the conformance kit itself: the kit
 * reaches it through the target's `fetch` (no socket), and it keeps its keys in memory. Correct, it follows the
 * contract the kit checks; each fault breaks one rule of it (runs twice, forgets a header, answers 200 where
 * the contract says 422, …), so a test can run a check against it and see the check fail with its message.
 * This is an app under test, not the library: its store is its own, not the library's.
 */
import { parseIdempotencyKey } from '../../src/core/key.ts';
import { canonicalWireForm } from '../../src/core/wire-form.ts';
import { type ConformanceTarget, createInProcessGate, type ExecutionGate } from '../../src/testing/index.ts';

export interface Order {
  sku: string;
  quantity: number;
}

/** Each one breaks one rule of the contract. */
export interface Faults {
  /** No idempotency at all: every request runs. */
  unprotected: boolean;
  /** A request without a key runs (unprotected) instead of a 400. */
  missingKeyRuns: boolean;
  /** The 400 for a missing or malformed key does not name the header. */
  keyErrorsAnonymous: boolean;
  /** This header value is taken as a key (stored as sent) instead of a 400. */
  acceptsKey: string | null;
  /** A request without a principal runs under the scope "anonymous". */
  anonymousRuns: boolean;
  /** A request without a principal claims its key (a record) before the 401. */
  anonymousClaims: boolean;
  /** A batched call runs. */
  batchRuns: boolean;
  /** An input that fails validation is stored (its 400 replays). */
  invalidStored: boolean;
  /** An input whose JSON holds a lone surrogate: 500 instead of 400. */
  surrogateFails: boolean;
  /** An input whose JSON holds a lone surrogate is taken and run. */
  surrogateRuns: boolean;
  /** The same key with another input replays the first answer instead of 422. */
  noFingerprint: boolean;
  /** The 422 carries Retry-After. */
  retryAfterOn422: boolean;
  /** The 422 is marked Idempotent-Replayed. */
  replayedOn422: boolean;
  /** The 422 runs the procedure anyway (and answers 422). */
  runsOn422: boolean;
  /** The 422 replaces the stored fingerprint with the new request's. */
  overwritesOn422: boolean;
  /** One scope for every principal. */
  oneScope: boolean;
  /** Replays lack Idempotent-Replayed. */
  noReplayedHeader: boolean;
  /** Replays say `Idempotent-Replayed: yes`. */
  replayedHeaderValue: string | null;
  /** A replay's body is another's (a new timestamp). */
  replayBodyDiffers: boolean;
  /** A replay's status is 200 whatever the first's. */
  replayStatus: number | null;
  /** A replay drops this header. */
  replayDrops: 'content-type' | 'location' | 'etag' | null;
  /** The first answer is marked Idempotent-Replayed. */
  replayedOnFirst: boolean;
  /** Successes carry Retry-After. */
  retryAfterOnSuccess: boolean;
  /** Successes answer this status instead of 201. */
  successStatus: number | null;
  /** A key sent quoted ("k") is another key than k. */
  quotedIsAnotherKey: boolean;
  /** The fingerprint is the body's text as sent, not its canonical JSON. */
  rawFingerprint: boolean;
  /** A duplicate in flight: waits for the first and replays it (allowed) instead of 409. */
  duplicateWaits: boolean;
  /** A duplicate in flight runs too. */
  duplicateRuns: boolean;
  /** A duplicate in flight gets this status instead of 409 (no Retry-After). */
  duplicateStatus: number | null;
  /** The 409's Retry-After (null: none). Default "1". */
  conflictRetryAfter: string | null;
  /** The Retry-After of every 409 but a key's first (null: none). */
  conflictRetryAfterAfterFirst: string | null;
  /** After the first completed, its key's duplicates still get this many 409s (Infinity: forever). */
  extraConflicts: number;
  /** The cap is not enforced. */
  noCap: boolean;
  /** The 429 answers this status instead. */
  capStatus: number | null;
  /** The 429's Retry-After (null: none). Default "1". */
  capRetryAfter: string | null;
  /** The 429 is marked Idempotent-Replayed. */
  replayedOn429: boolean;
  /** The refused key is claimed (a record) although refused with 429. */
  claimsOn429: boolean;
  /** The refused key stays refused after the others finished. */
  refusedStaysRefused: boolean;
  /** Business errors are not stored: the same key runs again. */
  errorsNotStored: boolean;
  /** The business error answers this status instead of 402. */
  businessStatus: number | null;
  /** The first business error is marked Idempotent-Replayed. */
  replayedOnBusinessError: boolean;
  /** A transient failure is stored: the same key replays the 5xx. */
  transientStored: boolean;
  /** A transient failure answers this status instead of 503. */
  transientStatus: number | null;
  /** The transient failure is marked Idempotent-Replayed. */
  replayedOnTransient: boolean;
  /** The retry after a transient failure answers the failure's body again (as a fresh 201). */
  transientBodyRepeated: boolean;
  /** A completed record reads as `processing` through the store. */
  storeSaysProcessing: boolean;
  /** The store finds nothing, ever. */
  storeForgets: boolean;
  /** Each execution counts twice (the effect happens twice). */
  doubleExecution: boolean;
  /** A replay executes the procedure again (and still replays). */
  executesOnReplay: boolean;
  /** Every 400 and 401 executes the procedure (and still refuses). */
  executesOnRejection: boolean;
  /** Every 400 is marked Idempotent-Replayed. */
  replayedOn400: boolean;
  /** This malformed header value is refused (400) but claimed under the other key first. */
  storesMalformed: { value: string; as: string } | null;
  /** Any JSON input is valid. */
  anyInput: boolean;
  /** The fingerprint is the body's text without whitespace: re-spacing is the same request, reordering not. */
  spacingInsensitive: boolean;
  /** The 422 deletes the key's record. */
  deletesOn422: boolean;
  /** The store finds at most this many keys (the first ones it is asked for); the others read as absent. */
  storeShowsAtMost: number | null;
  /** From this replay of a key on (1: the first replay), the replay lacks Idempotent-Replayed. */
  replaysBreakFrom: number | null;
}

interface Stored {
  status: number;
  headers: Record<string, string>;
  body: string;
}

interface KeyRecord {
  state: 'processing' | 'completed';
  replays: number;
  fingerprint: string;
  response: Stored | null;
  done: Promise<void>;
  finish(): void;
}

export interface FakeAppOptions {
  /** Called as each answer leaves (e.g. to move a fake clock: every request then takes that long). */
  onAnswer?: () => void;
  protocol?: 'trpc' | 'http';
  faults?: Partial<Faults>;
  /** How a check keeps executions in flight: a gate (`withHeldExecutions`), a latency seam, or none. */
  inFlight?: 'held' | 'slow' | 'slow-that-does-nothing' | 'none';
  /** `inFlightCap` of the target (the cap is enforced whenever set). */
  cap?: number;
  /** Give the target `store` (default true). */
  store?: boolean;
  /** Give the target `businessErrorInput` and `withTransientFailure` (default true). */
  optional?: boolean;
}

const PROCEDURE = 'shop.placeOrder';
const BASE = 'http://fake.test/api';

export function createFakeApp(options: FakeAppOptions = {}) {
  const faults: Partial<Faults> = options.faults ?? {};
  const protocol = options.protocol ?? 'trpc';
  const records = new Map<string, KeyRecord>();
  const gate = createInProcessGate();
  const state = {
    executions: 0,
    failing: false,
    slow: false,
    requests: [] as Array<{ url: string; headers: Record<string, string>; body: string }>,
    /** The body of the last 5xx, for the `transientBodyRepeated` fault. */
    lastFailure: null as string | null,
  };
  /** Keys refused with 429 that stay refused (`refusedStaysRefused`). */
  const refused = new Set<string>();
  /** How many 409s each key got (`conflictRetryAfterAfterFirst`). */
  const conflicts = new Map<string, number>();
  /** Slow executions wait here until some other request has been answered. */
  let slowWaiters: Array<() => void> = [];
  let answered = 0;

  const recordId = (scope: string, key: string) => `${scope}\u0000${key}`;
  const inFlightOf = (scope: string) =>
    [...records.entries()].filter(
      ([id, record]) => id.startsWith(`${scope}\u0000`) && record.state === 'processing',
    ).length;

  async function execute(order: Order): Promise<{ stored: boolean; answer: Stored }> {
    state.executions += faults.doubleExecution ? 2 : 1;
    const number = state.executions;
    if (state.slow) await new Promise<void>((resolve) => slowWaiters.push(resolve));
    await gate.pass();
    if (state.failing)
      return {
        stored: faults.transientStored === true,
        answer: json(faults.transientStatus ?? 503, { error: 'downstream unavailable', number }),
      };
    if (order.sku === 'declined')
      return {
        stored: faults.errorsNotStored !== true,
        answer: json(faults.businessStatus ?? 402, { error: 'card declined' }),
      };
    const answer = json(faults.successStatus ?? 201, { number, sku: order.sku, quantity: order.quantity });
    answer.headers.location = `/orders/${number}`;
    answer.headers.etag = `"${number}"`;
    if (faults.retryAfterOnSuccess) answer.headers['retry-after'] = '1';
    return { stored: true, answer };
  }

  function json(status: number, value: unknown): Stored {
    return { status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) };
  }

  function replayOf(record: KeyRecord, stored: Stored): Stored {
    record.replays += 1;
    if (faults.executesOnReplay) state.executions += 1;
    const headers = { ...stored.headers };
    if (faults.replayDrops) delete headers[faults.replayDrops];
    const broken = faults.replaysBreakFrom != null && record.replays >= faults.replaysBreakFrom;
    if (!faults.noReplayedHeader && !broken)
      headers['idempotent-replayed'] = faults.replayedHeaderValue ?? 'true';
    const body = faults.replayBodyDiffers ? stored.body.replace('{', '{"replayed":1,') : stored.body;
    return { status: faults.replayStatus ?? stored.status, headers, body };
  }

  async function handle(url: string, headers: Record<string, string>, text: string): Promise<Stored> {
    const parsedUrl = new URL(url);
    const batched = parsedUrl.searchParams.get('batch') === '1';
    const keyHeader = headers['idempotency-key'] ?? null;
    const principal = headers['x-principal'] ?? null;
    const problem = (status: number, message: string, extra: Record<string, string> = {}) => {
      const answer = json(status, { error: message });
      Object.assign(answer.headers, extra);
      if (status === 400 && faults.replayedOn400) answer.headers['idempotent-replayed'] = 'true';
      if ((status === 400 || status === 401) && faults.executesOnRejection) state.executions += 1;
      return answer;
    };

    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return problem(400, 'not JSON');
    }
    if (batched) {
      if (!faults.batchRuns) {
        if (faults.invalidStored && principal !== null && keyHeader !== null)
          records.set(recordId(principal, keyHeader), newRecord('', 'completed'));
        return problem(400, 'an Idempotency-Key request may not be batched');
      }
      body = (body as Record<string, unknown>)['0'];
    }
    const order = body as Partial<Order> | null;
    const valid =
      faults.anyInput === true ||
      (typeof order?.sku === 'string' &&
        order.sku !== '' &&
        Number.isInteger(order.quantity) &&
        (order.quantity ?? 0) > 0);
    const surrogate = typeof order?.sku === 'string' ? false : JSON.stringify(body).includes('\\ud800');

    if (faults.unprotected || (keyHeader === null && faults.missingKeyRuns)) {
      if (!valid) return problem(400, 'invalid order');
      return (await execute(order as Order)).answer;
    }
    const keyMessage = faults.keyErrorsAnonymous ? 'bad request' : 'Idempotency-Key missing or malformed';
    let key: string;
    if (keyHeader !== null && keyHeader === faults.storesMalformed?.value) {
      records.set(recordId(principal ?? 'anonymous', faults.storesMalformed.as), newRecord('', 'processing'));
      return problem(400, keyMessage);
    }
    if (keyHeader !== null && keyHeader === faults.acceptsKey) key = keyHeader;
    else {
      try {
        key = parseIdempotencyKey(keyHeader);
      } catch {
        return problem(400, keyMessage);
      }
      if (faults.quotedIsAnotherKey && keyHeader?.startsWith('"')) key = `quoted:${key}`;
    }
    if (principal === null && faults.anonymousClaims)
      records.set(recordId(faults.oneScope ? 'everyone' : 'anonymous', key), newRecord('', 'processing'));
    if (principal === null && !faults.anonymousRuns) return problem(401, 'who are you?');
    const scope = faults.oneScope ? 'everyone' : (principal ?? 'anonymous');

    if (surrogate) {
      if (faults.invalidStored) records.set(recordId(scope, key), newRecord('', 'completed'));
      if (faults.surrogateFails) return problem(500, 'Internal Server Error');
      if (!faults.surrogateRuns) return problem(400, 'the input cannot be fingerprinted');
    } else if (!valid) {
      const answer = problem(400, 'invalid order');
      if (faults.invalidStored) records.set(recordId(scope, key), newRecord('', 'completed', answer));
      return answer;
    }

    const fingerprint =
      faults.rawFingerprint || surrogate
        ? text
        : faults.spacingInsensitive
          ? text.replace(/\s/g, '')
          : canonicalWireForm(body);
    const id = recordId(scope, key);
    const existing = records.get(id);
    if (existing) {
      if (existing.fingerprint !== fingerprint && !faults.noFingerprint) {
        if (faults.overwritesOn422) existing.fingerprint = fingerprint;
        if (faults.deletesOn422) records.delete(id);
        if (faults.runsOn422) await execute(order as Order);
        return problem(422, 'Idempotency-Key reused with another request', {
          ...(faults.retryAfterOn422 ? { 'retry-after': '1' } : {}),
          ...(faults.replayedOn422 ? { 'idempotent-replayed': 'true' } : {}),
        });
      }
      if (existing.state === 'processing' && faults.duplicateRuns)
        return (await execute(order as Order)).answer;
      if (existing.state === 'processing' && faults.duplicateWaits) await existing.done;
      const extra = existing.state === 'completed' && (faults.extraConflicts ?? 0) > 0;
      if (extra) faults.extraConflicts = (faults.extraConflicts ?? 0) - 1;
      if (existing.state === 'processing' || extra) {
        if (faults.duplicateStatus) return problem(faults.duplicateStatus, 'busy');
        const count = (conflicts.get(id) ?? 0) + 1;
        conflicts.set(id, count);
        const retryAfter =
          count > 1 && faults.conflictRetryAfterAfterFirst !== undefined
            ? faults.conflictRetryAfterAfterFirst
            : faults.conflictRetryAfter === undefined
              ? '1'
              : faults.conflictRetryAfter;
        return problem(409, 'in progress', retryAfter === null ? {} : { 'retry-after': retryAfter });
      }
      if (existing.response) return replayOf(existing, existing.response);
    }

    const cap = options.cap;
    if (cap !== undefined && !faults.noCap && (inFlightOf(scope) >= cap || refused.has(id))) {
      if (faults.claimsOn429) records.set(id, newRecord(fingerprint, 'processing'));
      if (faults.refusedStaysRefused) refused.add(id);
      const retryAfter = faults.capRetryAfter === undefined ? '1' : faults.capRetryAfter;
      return problem(faults.capStatus ?? 429, 'too many in flight', {
        ...(retryAfter === null ? {} : { 'retry-after': retryAfter }),
        ...(faults.replayedOn429 ? { 'idempotent-replayed': 'true' } : {}),
      });
    }
    const record = newRecord(fingerprint, 'processing');
    records.set(id, record);
    const { stored, answer } = await execute(order as Order);
    if (stored) {
      record.state = 'completed';
      record.response = answer;
    } else records.delete(id);
    record.finish();
    const first = { ...answer, headers: { ...answer.headers } };
    if (faults.replayedOnFirst && answer.status < 300) first.headers['idempotent-replayed'] = 'true';
    if (faults.replayedOnBusinessError && answer.status === (faults.businessStatus ?? 402))
      first.headers['idempotent-replayed'] = 'true';
    if (faults.replayedOnTransient && answer.status >= 500) first.headers['idempotent-replayed'] = 'true';
    if (faults.transientBodyRepeated && state.lastFailure !== null && answer.status < 300)
      first.body = state.lastFailure;
    if (answer.status >= 500) state.lastFailure = answer.body;
    return first;
  }

  function newRecord(fingerprint: string, recordState: KeyRecord['state'], response: Stored | null = null) {
    let finish!: () => void;
    const done = new Promise<void>((resolve) => {
      finish = resolve;
    });
    return { state: recordState, replays: 0, fingerprint, response, done, finish } satisfies KeyRecord;
  }

  const fetch: NonNullable<ConformanceTarget<Order>['fetch']> = async (url, init) => {
    const headers = Object.fromEntries(
      Object.entries(init.headers).map(([name, value]) => [name.toLowerCase(), value]),
    );
    state.requests.push({ url, headers, body: init.body });
    const answer = await handle(url, headers, init.body);
    options.onAnswer?.();
    answered += 1;
    const waiting = slowWaiters;
    slowWaiters = [];
    for (const go of waiting) go();
    return new Response(answer.body, { status: answer.status, headers: answer.headers });
  };

  /** The keys the store has shown (`storeShowsAtMost`). */
  const shown = new Set<string>();
  const inFlight = options.inFlight ?? 'held';
  const target: ConformanceTarget<Order> = {
    ...(protocol === 'http' ? { protocol: 'http' as const } : {}),
    url: protocol === 'http' ? `${BASE}/orders` : `${BASE}/trpc/`,
    procedure: PROCEDURE,
    input: () => ({ sku: 'book', quantity: 1 }),
    differentInput: () => ({ sku: 'book', quantity: 2 }),
    invalidInput: () => ({ sku: '', quantity: -1 }),
    principals: [
      { headers: { 'x-principal': 'alice' }, scope: 'alice' },
      { headers: { 'x-principal': 'bob' }, scope: 'bob' },
    ],
    unauthenticatedHeaders: {},
    executions: async () => state.executions,
    fetch,
    ...(options.optional === false
      ? {}
      : {
          businessErrorInput: () => ({ sku: 'declined', quantity: 1 }),
          async withTransientFailure<T>(run: () => Promise<T>) {
            state.failing = true;
            try {
              return await run();
            } finally {
              state.failing = false;
            }
          },
        }),
    ...(inFlight === 'held'
      ? { withHeldExecutions: <T>(run: (held: ExecutionGate) => Promise<T>) => gate.holdWhile(run) }
      : inFlight === 'slow'
        ? {
            async withSlowExecution<T>(run: () => Promise<T>) {
              state.slow = true;
              try {
                return await run();
              } finally {
                state.slow = false;
              }
            },
          }
        : inFlight === 'slow-that-does-nothing'
          ? { withSlowExecution: <T>(run: () => Promise<T>) => run() }
          : {}),
    ...(options.cap === undefined ? {} : { inFlightCap: options.cap }),
    ...(options.store === false
      ? {}
      : {
          store: {
            async find({ scope, procedure, key }: { scope: string; procedure: string; key: string }) {
              // A real store cannot look a key up without its scope.
              if (scope === undefined) throw new Error('find: no scope');
              if (procedure !== PROCEDURE || faults.storeForgets) return null;
              if (faults.storeShowsAtMost != null) {
                if (!shown.has(key) && shown.size >= faults.storeShowsAtMost) return null;
                shown.add(key);
              }
              const record = records.get(recordId(scope, key));
              if (!record) return null;
              return {
                scope,
                procedure,
                key,
                fingerprint: record.fingerprint,
                state: faults.storeSaysProcessing ? 'processing' : record.state,
              } as never;
            },
          },
        }),
  };
  return { target, state, records, answeredCount: () => answered };
}
