/** Status-table rows about a request that succeeds: the first execution and every form of its replay. */
import { RecordState } from '../../core/record.ts';
import {
  type ConformanceCheck,
  ConformanceCheckId,
  expectExecutions,
  expectReplayOf,
  fail,
  recordsOf,
} from '../check.ts';
import { sendFresh } from './requests.ts';

const always = () => null;

export const firstRequest: ConformanceCheck = {
  id: ConformanceCheckId.firstRequest,
  title: 'first request with a new key → 2xx (tRPC: 200), executed once, not marked as a replay',
  unavailableReason: always,
  async run(context) {
    const { key, first } = await sendFresh(context);
    await expectExecutions(context, 1, 'first request');
    const records = recordsOf(context);
    if (records) {
      const record = await records.find(key);
      if (record?.state !== RecordState.completed)
        fail(`first request: expected a completed record in the store, found ${record?.state ?? 'none'}`);
    }
    return `${first.status} in ${first.receivedAt - first.sentAt} ms, 1 execution`;
  },
};

export const replay: ConformanceCheck = {
  id: ConformanceCheckId.replay,
  title: 'same key + same input → the stored answer, byte-identical, with Idempotent-Replayed: true',
  unavailableReason: always,
  async run(context) {
    const { key, input, first } = await sendFresh(context);
    const second = await context.client.post({ key, input });
    expectReplayOf(second, first, 'second request');
    const third = await context.client.post({ key, input });
    expectReplayOf(third, first, 'third request');
    await expectExecutions(context, 1, 'three requests with one key');
    return `2 replays byte-identical to the first ${first.body.length}-character body, 1 execution`;
  },
};

export const canonicalInput: ConformanceCheck = {
  id: ConformanceCheckId.canonicalInput,
  title: 'same key + the same input with its JSON keys reordered and re-spaced → replay (canonical JSON)',
  unavailableReason: always,
  async run(context) {
    const { key, input, first } = await sendFresh(context);
    const wire = context.client.wireBody(input);
    const reordered = JSON.stringify(reverseObjectKeys(JSON.parse(wire) as unknown), null, 1);
    const second = await context.client.post({ key, rawBody: reordered });
    expectReplayOf(second, first, 'the reordered request');
    await expectExecutions(context, 1, 'two requests with one key');
    return reordered.replace(/\s/g, '') === wire
      ? 're-spaced body replayed (the input has no object with two keys to reorder)'
      : 'reordered, re-spaced body replayed byte-identically';
  },
};

export const quotedKey: ConformanceCheck = {
  id: ConformanceCheckId.quotedKey,
  title: 'the key as a quoted sf-string ("<key>") is the same key as the bare value → replay',
  unavailableReason: always,
  async run(context) {
    const { key, input, first: bare } = await sendFresh(context, 'bare key');
    const quoted = await context.client.post({ key: `"${key}"`, input });
    expectReplayOf(quoted, bare, 'quoted key');
    await expectExecutions(context, 1, 'bare then quoted key');
    return 'bare then quoted: 1 execution, 1 replay';
  },
};

function reverseObjectKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseObjectKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([name, child]) => [name, reverseObjectKeys(child)]),
  );
}
