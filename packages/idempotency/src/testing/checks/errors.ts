/** Status-table rows about a first request that fails: stored when deterministic, released when transient. */
import {
  type ConformanceCheck,
  ConformanceCheckId,
  expectExecutions,
  expectNothingStored,
  expectReplayOf,
  fail,
  requireCapability,
  unavailableWithout,
} from '../check.ts';
import { describeSent } from '../client.ts';
import { newRequest, sendExpectingFresh } from './requests.ts';

export const storedError: ConformanceCheck = {
  id: ConformanceCheckId.storedError,
  title: 'a deterministic business error (4xx) is stored: the same key replays it byte-identically',
  unavailableReason: unavailableWithout(
    'businessErrorInput',
    'give businessErrorInput() (an input the procedure refuses with a 4xx)',
  ),
  async run(context) {
    const { target } = context;
    requireCapability(target, 'businessErrorInput');
    const key = context.newKey();
    const input = target.businessErrorInput();
    const first = await context.client.post({ key, input });
    // 409 and 429 belong to the idempotency layer, 400 and 401 to the request itself: none is a business outcome.
    const { status } = first;
    if (status < 402 || status >= 500 || status === 409 || status === 429)
      fail(`business error: expected a 4xx other than 400, 401, 409 and 429, got ${describeSent(first)}`);
    if (first.replayed !== null)
      fail('business error: the first answer must not be marked Idempotent-Replayed');
    const afterFirst = await context.executionsSinceStart();
    const again = await context.client.post({ key, input });
    expectReplayOf(again, first, 'the same key again');
    await expectExecutions(context, afterFirst, 'the replayed error');
    return `${first.status} stored and replayed byte-identically; the replay executed nothing`;
  },
};

export const transientFailure: ConformanceCheck = {
  id: ConformanceCheckId.transientFailure,
  title: 'a transient failure (5xx) is not stored: the same key then runs again',
  unavailableReason: unavailableWithout(
    'withTransientFailure',
    'give withTransientFailure(run) (make the procedure fail with a 5xx)',
  ),
  async run(context) {
    const { target } = context;
    requireCapability(target, 'withTransientFailure');
    const { key, input } = newRequest(context);
    const failed = await target.withTransientFailure(() => context.client.post({ key, input }));
    if (failed.status < 500) fail(`request during the failure: expected a 5xx, got ${describeSent(failed)}`);
    if (failed.replayed !== null) fail('request during the failure: must not be marked Idempotent-Replayed');
    await expectNothingStored(context, key, 'after the transient failure');
    const retry = await sendExpectingFresh(context, { key, input }, 'the same key after the failure');
    if (retry.body === failed.body) fail('the retry returned the failure again');
    return `${failed.status}, then the same key ran again: ${retry.status}`;
  },
};
