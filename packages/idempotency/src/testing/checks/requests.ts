/**
 * The requests most checks start from: a new key with the target's input for it, and that key's first
 * execution.
 */
import { type CheckContext, expectFresh } from '../check.ts';
import type { Sent } from '../client.ts';

/** A key no request has used yet, and the input it goes with (`input()` is called once per new key). */
export interface NewRequest<TInput> {
  key: string;
  input: TInput;
}

export function newRequest<TInput>(context: CheckContext<TInput>): NewRequest<TInput> {
  const key = context.newKey();
  return { key, input: context.target.input() };
}

/**
 * A new key's first request, which must be executed (`what` names it in failure details): the key, its input
 * and the answer that later requests with the key are compared with.
 */
export async function sendFresh<TInput>(
  context: CheckContext<TInput>,
  what = 'first request',
): Promise<NewRequest<TInput> & { first: Sent }> {
  const request = newRequest(context);
  const first = await context.client.post(request);
  expectFresh(first, what);
  return { ...request, first };
}
