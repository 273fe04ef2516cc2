/**
 * The requests most checks start from: a new key with the target's input for it, that key's first execution,
 * and a request that must be executed.
 */
import { type CheckContext, expectFresh } from '../check.ts';
import type { Sent } from '../client.ts';

/** What most checks send: an Idempotency-Key and the input that goes with it. */
export interface KeyedRequest<TInput> {
  key: string;
  input: TInput;
}

/** A key no request has used yet, with the target's input for it (`input()` is called once per new key). */
export function newRequest<TInput>(context: CheckContext<TInput>): KeyedRequest<TInput> {
  const key = context.newKey();
  return { key, input: context.target.input() };
}

/**
 * Sends a request that must be executed (`what` names it in failure details): a key's first, or one whose key an
 * earlier answer (a refusal, a transient failure) had to leave unused. Returns the answer.
 */
export async function sendExpectingFresh<TInput>(
  context: CheckContext<TInput>,
  request: KeyedRequest<TInput>,
  what: string,
): Promise<Sent> {
  const sent = await context.client.post(request);
  expectFresh(sent, what);
  return sent;
}

/**
 * A new key's first request, which must be executed (`what` names it in failure details): the key, its input
 * and the answer that later requests with the key are compared with.
 */
export async function sendFresh<TInput>(
  context: CheckContext<TInput>,
  what = 'first request',
): Promise<KeyedRequest<TInput> & { first: Sent }> {
  const request = newRequest(context);
  return { ...request, first: await sendExpectingFresh(context, request, what) };
}
