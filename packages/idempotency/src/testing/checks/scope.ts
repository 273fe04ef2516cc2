/** The key's scope: (principal, procedure, key). The same key from another principal is another key. */
import { RecordState } from '../../core/record.ts';
import {
  type ConformanceCheck,
  ConformanceCheckId,
  expectExecutions,
  expectFresh,
  expectReplayOf,
  fail,
  recordsOf,
} from '../check.ts';
import { sendFresh } from './requests.ts';

export const scope: ConformanceCheck = {
  id: ConformanceCheckId.scope,
  title: 'the same key from two principals → two executions; each replays only its own answer',
  unavailableReason: () => null,
  async run(context) {
    const { key, input, first: fromA } = await sendFresh(context, 'principal A');
    const fromB = await context.client.post({ key, input, from: 1 });
    if (fromB.replayed !== null)
      fail(`principal B got a replay (of A's answer?) instead of its own execution`);
    expectFresh(fromB, 'principal B, same key');
    await expectExecutions(context, 2, 'one key from two principals');

    expectReplayOf(await context.client.post({ key, input, from: 0 }), fromA, 'principal A again');
    expectReplayOf(await context.client.post({ key, input, from: 1 }), fromB, 'principal B again');
    await expectExecutions(context, 2, 'after both replays');

    const recordsOfA = recordsOf(context, 0);
    const recordsOfB = recordsOf(context, 1);
    if (recordsOfA && recordsOfB) {
      if (recordsOfA.scope === recordsOfB.scope) fail('the target gives both principals the same scope');
      for (const records of [recordsOfA, recordsOfB]) {
        const record = await records.find(key);
        if (record?.state !== RecordState.completed) fail(`no completed record for scope ${records.scope}`);
      }
    }
    return '2 executions, each principal replays its own answer';
  },
};
