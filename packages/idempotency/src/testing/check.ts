/**
 * What a conformance check is, and the few assertions checks make. A check throws `ConformanceFailure` with a
 * detail a developer can act on, or returns a one-line account of what it saw.
 */
import type { IdempotencyRecord } from '../core/record.ts';
import type { ConformanceClient, Sent } from './client.ts';
import { describeSent, hasRetryAfterSeconds, isConflict, isSuccess } from './client.ts';
import type { ConformanceTarget, ResolvedConformanceOptions } from './target.ts';

export const ConformanceCheckId = {
  firstRequest: 'first-request',
  replay: 'replay',
  canonicalInput: 'replay-canonical-input',
  quotedKey: 'key-sf-string',
  storedError: 'stored-error',
  transientFailure: 'transient-failure',
  missingKey: 'missing-key',
  malformedKey: 'malformed-key',
  noPrincipal: 'no-principal',
  invalidInput: 'invalid-input',
  unfingerprintableInput: 'unfingerprintable-input',
  batched: 'batched',
  fingerprint: 'fingerprint',
  inFlight: 'in-flight',
  inFlightCap: 'in-flight-cap',
  concurrency: 'concurrency',
  scope: 'scope',
} as const;
export type ConformanceCheckId = (typeof ConformanceCheckId)[keyof typeof ConformanceCheckId];

export class ConformanceFailure extends Error {
  override name = 'ConformanceFailure';
}

export interface CheckContext<TInput> {
  target: ConformanceTarget<TInput>;
  client: ConformanceClient;
  options: ResolvedConformanceOptions;
  /** A key no request has used yet. */
  newKey(): string;
  /** The target's execution counter, relative to the start of this check. */
  executionsSinceStart(): Promise<number>;
}

export interface ConformanceCheck {
  id: ConformanceCheckId;
  /** The contract row or property, as a sentence. */
  title: string;
  /** Why the check cannot run against this target (an optional capability is missing), or null. */
  unavailableReason<TInput>(target: ConformanceTarget<TInput>): string | null;
  run<TInput>(context: CheckContext<TInput>): Promise<string>;
}

export function fail(detail: string): never {
  throw new ConformanceFailure(detail);
}

/** The target's optional functions that each, alone, enable one check (see `ConformanceTarget`). */
type Capability = 'businessErrorInput' | 'withTransientFailure';

/** The `unavailableReason` of a check that needs the target's optional `capability`: `reason` says what to give. */
export function unavailableWithout(
  capability: Capability,
  reason: string,
): ConformanceCheck['unavailableReason'] {
  return (target) => (target[capability] ? null : reason);
}

/**
 * Fails a check run against a target that lacks the optional `capability` it needs: the runner would not have
 * run it (`unavailableWithout`), but a caller may run any check.
 */
export function requireCapability<TInput, C extends Capability>(
  target: ConformanceTarget<TInput>,
  capability: C,
): asserts target is ConformanceTarget<TInput> & Required<Pick<ConformanceTarget<TInput>, C>> {
  if (!target[capability]) fail(`no ${capability}`);
}

export function expectStatus(sent: Sent, expected: number, what: string) {
  if (sent.status !== expected) fail(`${what}: expected HTTP ${expected}, got ${describeSent(sent)}`);
}

/** A first execution: a success (2xx: tRPC's 200, a plain HTTP API's 201), not a replay, no Retry-After. */
export function expectFresh(sent: Sent, what: string) {
  if (!isSuccess(sent)) fail(`${what}: expected a success (2xx), got ${describeSent(sent)}`);
  if (sent.replayed !== null)
    fail(`${what}: expected a fresh execution, got Idempotent-Replayed: ${sent.replayed}`);
  if (sent.retryAfter !== null) fail(`${what}: a success must not carry Retry-After (${sent.retryAfter})`);
}

/** A replay of `original`: same status, `Idempotent-Replayed: true`, byte-identical body. */
export function expectReplayOf(sent: Sent, original: Sent, what: string) {
  expectStatus(sent, original.status, what);
  if (sent.replayed !== 'true')
    fail(`${what}: expected Idempotent-Replayed: true, got ${sent.replayed ?? 'no such header'}`);
  if (sent.body !== original.body)
    fail(
      `${what}: the replayed body differs from the first.\n  first:  ${original.body}\n  replay: ${sent.body}`,
    );
  for (const [name, header] of [
    ['Content-Type', 'contentType'],
    ['Location', 'location'],
    ['ETag', 'etag'],
  ] as const) {
    if (sent[header] !== original[header])
      fail(`${what}: ${name} ${sent[header]} differs from the first's ${original[header]}`);
  }
}

/** `sent` (`what`, e.g. "the 429") carries Retry-After in whole seconds. */
export function expectRetryAfterSeconds(sent: Sent, what: string) {
  if (!hasRetryAfterSeconds(sent))
    fail(`${what} must carry Retry-After in whole seconds: ${describeSent(sent)}`);
}

/** The contract's answer to a malformed request: 400, not a replay, no Retry-After. */
export function expectRejected(sent: Sent, status: number, what: string) {
  expectStatus(sent, status, what);
  if (sent.replayed !== null) fail(`${what}: a rejection must not be marked Idempotent-Replayed`);
}

export async function expectExecutions<TInput>(
  context: CheckContext<TInput>,
  expected: number,
  what: string,
) {
  const counted = await context.executionsSinceStart();
  if (counted !== expected)
    fail(`${what}: expected ${expected} execution(s) of the procedure, counted ${counted}`);
}

/** One principal's records of the target's procedure, as its store keeps them. */
export interface PrincipalRecords {
  /** The scope the target says the principal's keys are stored under. */
  scope: string;
  find(key: string): Promise<IdempotencyRecord | null>;
}

/**
 * Principal `index`'s records in the target's store, or null when the target exposes no store or no scope for
 * that principal: the assertions on what is stored are then skipped, and the HTTP ones stand alone.
 */
export function recordsOf<TInput>(context: CheckContext<TInput>, index: 0 | 1 = 0): PrincipalRecords | null {
  const { store } = context.target;
  const { scope } = context.client.principal(index);
  if (!store || scope === undefined) return null;
  return { scope, find: (key) => store.find({ scope, procedure: context.target.procedure, key }) };
}

/** Principal A's record of `key` is absent from the store (checked only when the target exposes it). */
export async function expectNothingStored<TInput>(context: CheckContext<TInput>, key: string, what: string) {
  const records = recordsOf(context);
  if (!records) return;
  const record = await records.find(key);
  if (record) fail(`${what}: expected nothing stored for key ${key}, found a ${record.state} record`);
}

/**
 * Retries a 409 with the same request, honouring Retry-After (capped), until it is something else. Returns the
 * final answer and how many retries it took.
 */
export async function retryWhileConflict(
  first: Sent,
  resend: () => Promise<Sent>,
  options: ResolvedConformanceOptions,
): Promise<{ final: Sent; retries: number }> {
  let current = first;
  let retries = 0;
  while (current.status === 409 && retries < options.maxRetries) {
    if (!isConflict(current))
      fail(`a 409 must carry Retry-After in whole seconds, got ${describeSent(current)}`);
    await sleep(Math.min(Number(current.retryAfter) * 1000, options.maxRetryWaitMs));
    current = await resend();
    retries += 1;
  }
  return { final: current, retries };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
