/**
 * What the conformance kit needs to know about an app: how to reach one idempotent mutation over HTTP, two
 * valid inputs, two principals, and a counter of the mutation's real effect. Nothing here is tied to this
 * repository, to a database or to a test runner.
 *
 * Every field is read when a check runs, not when the target is declared: a getter (`get url() { … }`) works
 * for values that exist only once the server has started.
 */
import type { IdempotencyRecord, RecordKey } from '../core/record.ts';
import type { ExecutionGate } from './gate.ts';

/** The parts of a fetch `Response` the kit reads. */
export interface ConformanceResponse {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}

/** The parts of `fetch` the kit calls; `globalThis.fetch` fits, and so does any adapter with this shape. */
export type ConformanceFetch = (
  url: string,
  init: { method: 'POST'; headers: Record<string, string>; body: string },
) => Promise<ConformanceResponse>;

export interface ConformancePrincipal {
  /** Headers that authenticate this principal, e.g. `{ authorization: 'Bearer …' }`. */
  headers: Readonly<Record<string, string>>;
  /** The scope the app stores this principal's keys under (only read when `store` is given). */
  scope?: string;
}

export interface ConformanceTarget<TInput> {
  /**
   * How requests are built. `trpc` (the default): `url` is the tRPC endpoint, the procedure path is appended,
   * and batches exist. `http`: `url` is the route itself, POSTed as is with the input as its JSON body (the
   * `./fetch` and `./express` adapters, or any plain HTTP API); there are no batches.
   */
  protocol?: 'trpc' | 'http';
  /**
   * tRPC: the HTTP endpoint, e.g. `http://127.0.0.1:3000/api/trpc` (the procedure path is appended). Plain
   * HTTP: the route's URL, e.g. `http://127.0.0.1:3000/orders`.
   */
  url: string;
  /**
   * The idempotent mutation's path, e.g. `notes.create`; for plain HTTP, the route's name in the store (the
   * adapter's `procedure` option).
   */
  procedure: string;
  /**
   * A valid input. Called once per new key; each call may return a fresh value (e.g. a unique title). Every
   * request that reuses a key sends the input that key got.
   */
  input(): TInput;
  /** A valid input that differs from `input()`'s in a way the procedure sees (same key → 422). */
  differentInput(): TInput;
  /** An input the procedure's validation rejects (400), e.g. a missing required field. */
  invalidInput(): unknown;
  /**
   * The router's transformer on the wire, e.g. `superjson.serialize`; default: the input as is (no
   * transformer). Written as a method so that transformers typed for their own value types fit.
   */
  serialize?(input: unknown): unknown;
  /** Two different principals: A runs most checks, B proves the key's scope. */
  principals: readonly [ConformancePrincipal, ConformancePrincipal];
  /** Headers of a request the app must refuse with 401 (no principal: none at all, or a bad token). */
  unauthenticatedHeaders: Readonly<Record<string, string>>;
  /**
   * How many times the procedure's real effect has happened so far (e.g. `count(*)` of the rows it inserts,
   * scoped to this target's inputs if other tests share the database). The kit compares it before and after
   * each check; it must not move for any other reason while the kit runs.
   */
  executions(): Promise<number>;
  /** Extra headers for every request (e.g. a tenant header). */
  headers?: Readonly<Record<string, string>>;
  /** Default `globalThis.fetch`. */
  fetch?: ConformanceFetch;
  /**
   * An input that the procedure answers with a deterministic business error (e.g. a declined card: 402). Enables
   * the check that such errors are stored and replayed.
   */
  businessErrorInput?(): TInput;
  /**
   * Runs `run` while the procedure's executions that start inside it take about a second or more (e.g. a latency
   * knob on a fake downstream service, or a lock held on a table the procedure writes). Enables the in-flight
   * check (409 + Retry-After, or wait and replay) and, with `inFlightCap`, the 429 check.
   */
  withSlowExecution?<T>(run: () => Promise<T>): Promise<T>;
  /**
   * Runs `run` while the procedure's executions that start inside it stop at a gate (after their claim) until
   * the check calls `gate.release()`, and tell the check how many wait there (`gate.reached(n)`). Preferred
   * over `withSlowExecution`: the in-flight checks then wait on events, so a busy machine cannot make an
   * execution finish before the check looked at it. `createInProcessGate()` is one for an app in the test's
   * process; a fake downstream service can offer the same over HTTP. When both are given, this one is used.
   */
  withHeldExecutions?<T>(run: (gate: ExecutionGate) => Promise<T>): Promise<T>;
  /**
   * Runs `run` while the procedure's executions fail transiently (a 5xx: a downstream outage, a database error).
   * Enables the check that such a failure is not stored: the retry with the same key runs again.
   */
  withTransientFailure?<T>(run: () => Promise<T>): Promise<T>;
  /**
   * The procedure's `maxInFlightPerScope` when it applies (external mode; transactional claims are invisible to
   * the count until they commit). Enables the 429 check; needs `withHeldExecutions` or `withSlowExecution`.
   */
  inFlightCap?: number;
  /**
   * The app's idempotency store, read through its public interface only, with each principal's `scope`:
   * enables "nothing was stored" assertions beside the HTTP ones.
   */
  store?: { find(key: RecordKey): Promise<IdempotencyRecord | null> };
}

/** How hard the kit pushes; the defaults suit a test database on one machine. */
export interface ConformanceOptions {
  /** Parallel requests with one key in the concurrency check. Default 20. */
  concurrency?: number;
  /** Retries of a 409 before a check gives up. Default 10. */
  maxRetries?: number;
  /** Upper bound on one wait before retrying a 409, whatever its Retry-After says. Default 2 000 ms. */
  maxRetryWaitMs?: number;
  /** In-flight check with `withSlowExecution`: how long after the first request its duplicate is sent. Default 200 ms. */
  inFlightProbeDelayMs?: number;
  /**
   * 429 check with `withSlowExecution` and without `store`: how long to let the first requests claim their keys.
   * Default 500 ms.
   */
  capSettleMs?: number;
}

export type ResolvedConformanceOptions = Required<ConformanceOptions>;

export function resolveConformanceOptions(options: ConformanceOptions = {}): ResolvedConformanceOptions {
  return {
    concurrency: options.concurrency ?? 20,
    maxRetries: options.maxRetries ?? 10,
    maxRetryWaitMs: options.maxRetryWaitMs ?? 2_000,
    inFlightProbeDelayMs: options.inFlightProbeDelayMs ?? 200,
    capSettleMs: options.capSettleMs ?? 500,
  };
}
