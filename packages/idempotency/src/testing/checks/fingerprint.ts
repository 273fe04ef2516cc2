/** The request fingerprint: one key belongs to one request; reusing it for another is refused. */
import {
  type ConformanceCheck,
  ConformanceCheckId,
  expectExecutions,
  expectRejected,
  expectReplayOf,
  fail,
  recordsOf,
} from '../check.ts';
import { sendFresh } from './requests.ts';

export const fingerprint: ConformanceCheck = {
  id: ConformanceCheckId.fingerprint,
  title: 'same key + a different input → 422, nothing executed, the stored answer untouched',
  unavailableReason: () => null,
  async run(context) {
    const { key, input, first } = await sendFresh(context);
    const records = recordsOf(context);
    const recordBefore = await records?.find(key);

    const different = await context.client.post({ key, input: context.target.differentInput() });
    expectRejected(different, 422, 'the same key with a different input');
    if (different.retryAfter !== null) fail('a 422 must not carry Retry-After: retrying it cannot help');
    await expectExecutions(context, 1, 'first request then a different input');

    const recordAfter = await records?.find(key);
    if (recordBefore && recordAfter?.fingerprint !== recordBefore.fingerprint)
      fail('the 422 changed the stored record: its fingerprint is no longer the first request’s');
    const original = await context.client.post({ key, input });
    expectReplayOf(original, first, 'the original input again');
    return '422 for the different input, 1 execution, the original still replays';
  },
};
