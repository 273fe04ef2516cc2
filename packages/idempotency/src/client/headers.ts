import { IDEMPOTENCY_KEY_HEADER } from '../protocol.ts';
import { mutationKeyOf } from './context.ts';

/** The part of a tRPC `Operation` the header needs. */
export interface OperationLike {
  type: string;
  context: Readonly<Record<string, unknown>>;
}

/**
 * The `Idempotency-Key` header of a keyed mutation, for the terminating link:
 * `httpLink({ url, headers: ({ op }) => idempotencyHeaders(op) })`.
 * `{ 'Idempotency-Key': key }` when `op` is a mutation whose `op.context.idempotencyKey` is a non-empty string,
 * else `{}` (queries, subscriptions and unkeyed mutations carry no key).
 */
export function idempotencyHeaders(op: OperationLike): Record<string, string> {
  const key = mutationKeyOf(op);
  return key === undefined ? {} : { [IDEMPOTENCY_KEY_HEADER]: key };
}
