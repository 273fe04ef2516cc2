/**
 * What a keyed mutation carries in its tRPC operation context (`trpc: { context }` of a procedure call), and
 * what the retry link reports back through it.
 */
import { IDEMPOTENT_REPLAYED_HEADER } from '../protocol.ts';
import type { RetryReason } from './retry-policy.ts';

/** A progress report of one keyed mutation, from `idempotentRetryLink`. */
export type RetryLinkEvent =
  /** An attempt is being sent (1-based; the same operation and key every time). */
  | { type: 'attempt'; attempt: number; maxAttempts: number }
  /** Attempt `attempt` failed with a retryable error; the next one starts after `delayMs`. */
  | { type: 'retrying'; attempt: number; delayMs: number; reason: RetryReason; error: unknown }
  /**
   * The server answered with a final response: a success (`ok`) or a final error. `replayed` is true when it
   * carried `Idempotent-Replayed: true` (a stored result of an earlier attempt with this key).
   */
  | { type: 'response'; ok: boolean; replayed: boolean; status: number | undefined };

export type IdempotencyObserver = (event: RetryLinkEvent) => void;

/**
 * The operation context of a keyed mutation. A type alias (not an interface) so that it is assignable to
 * tRPC's `OperationContext` (`Record<string, unknown>`).
 */
export type KeyedMutationContext = {
  idempotencyKey: string;
  idempotencyObserver?: IdempotencyObserver | undefined;
};

/** `value` when it is an object (not null), else undefined. */
function asObject(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
}

/** `value[name]` when `value` is an object, else undefined: reads fields of what the network handed us. */
export function property(value: unknown, name: string): unknown {
  return asObject(value)?.[name];
}

/** The operation's key when it is a non-empty string, else undefined. */
export function getIdempotencyKey(
  context: Readonly<Record<string, unknown>> | undefined,
): string | undefined {
  const key = context?.idempotencyKey;
  return typeof key === 'string' && key !== '' ? key : undefined;
}

/** The key of a keyed mutation (`op.context.idempotencyKey`, a non-empty string), else undefined. */
export function mutationKeyOf(op: {
  type: string;
  context: Readonly<Record<string, unknown>>;
}): string | undefined {
  return op.type === 'mutation' ? getIdempotencyKey(op.context) : undefined;
}

export function getIdempotencyObserver(
  context: Readonly<Record<string, unknown>> | undefined,
): IdempotencyObserver | undefined {
  const observer = context?.idempotencyObserver;
  return typeof observer === 'function' ? (observer as IdempotencyObserver) : undefined;
}

// --- the fetch Response, as tRPC's httpLink exposes it ----------------------------------------------------
// On success httpLink emits `{ result, context: { response, responseJSON } }`; on an HTTP error the
// TRPCClientError has `meta: { response, responseJSON }`. A network error has neither.

interface ResponseLike {
  status?: unknown;
  headers?: { get(name: string): string | null };
}

/** The fetch Response behind a result envelope's `context` or an error's `meta`, if any. */
export function responseOf(holder: unknown): ResponseLike | undefined {
  return asObject(property(holder, 'response'));
}

/** The Response behind a TRPCClientError (`error.meta.response`), if the server answered at all. */
export function errorResponseOf(error: unknown): ResponseLike | undefined {
  return responseOf(property(error, 'meta'));
}

export function readResponseHeader(response: ResponseLike | undefined, name: string): string | null {
  const headers = response?.headers;
  return typeof headers?.get === 'function' ? headers.get(name) : null;
}

export function responseStatus(response: ResponseLike | undefined): number | undefined {
  const status = response?.status;
  return typeof status === 'number' ? status : undefined;
}

/** `Idempotent-Replayed: true` (also the sf-boolean `?1`), case and surrounding whitespace ignored. */
export function isReplayedResponse(response: ResponseLike | undefined): boolean {
  return /^\s*(?:true|\?1)\s*$/i.test(readResponseHeader(response, IDEMPOTENT_REPLAYED_HEADER) ?? '');
}
