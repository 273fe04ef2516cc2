/** The key's scope: (principal, procedure, key). The same key from another principal is another key. */
import { RecordState } from '../../core/record.ts';
import {
  type ConformanceCheck,
  ConformanceCheckId,
  expectExecutions,
  expectFresh,
  expectReplayOf,
  fail,
} from '../check.ts';

export const scope: ConformanceCheck = {
  id: ConformanceCheckId.scope,
  title: 'the same key from two principals → two executions; each replays only its own answer',
  unavailableReason: () => null,
  async run(context) {
    const key = context.newKey();
    const input = context.target.input();
    const fromA = await context.client.post({ key, input, from: 0 });
    expectFresh(fromA, 'principal A');
    const fromB = await context.client.post({ key, input, from: 1 });
    if (fromB.replayed !== null)
      fail(`principal B got a replay (of A's answer?) instead of its own execution`);
    expectFresh(fromB, 'principal B, same key');
    await expectExecutions(context, 2, 'one key from two principals');

    expectReplayOf(await context.client.post({ key, input, from: 0 }), fromA, 'principal A again');
    expectReplayOf(await context.client.post({ key, input, from: 1 }), fromB, 'principal B again');
    await expectExecutions(context, 2, 'after both replays');

    const { store } = context.target;
    const scopeA = context.client.principal(0).scope;
    const scopeB = context.client.principal(1).scope;
    if (store && scopeA !== undefined && scopeB !== undefined) {
      if (scopeA === scopeB) fail('the target gives both principals the same scope');
      for (const scopeOf of [scopeA, scopeB]) {
        const record = await store.find({ scope: scopeOf, procedure: context.target.procedure, key });
        if (record?.state !== RecordState.completed) fail(`no completed record for scope ${scopeOf}`);
      }
    }
    return '2 executions, each principal replays its own answer';
  },
};
