/**
 * Status-table rows about requests refused before anything runs: no key, a malformed key, no principal, an
 * invalid or unfingerprintable input, a batch. Each must execute nothing and store nothing.
 */
import { MAX_KEY_LENGTH } from '../../protocol.ts';
import {
  type CheckContext,
  type ConformanceCheck,
  ConformanceCheckId,
  expectExecutions,
  expectNothingStored,
  expectRejected,
  fail,
} from '../check.ts';
import type { Sent } from '../client.ts';
import type { ConformanceTarget } from '../target.ts';
import { newRequest, sendExpectingFresh } from './requests.ts';

const always = () => null;

/** The library's own messages name the header; a 400 that does not is the app refusing something else. */
function expectNamesTheHeader(body: string, what: string) {
  if (!body.includes('Idempotency-Key'))
    fail(`${what}: the 400 does not mention Idempotency-Key, so it is not the key being refused: ${body}`);
}

/** A refusal before anything ran (`what` names the request): `status`, not marked as a replay, no execution. */
async function expectRefusedBeforeRunning<TInput>(
  context: CheckContext<TInput>,
  sent: Sent,
  status: number,
  what: string,
) {
  expectRejected(sent, status, what);
  await expectExecutions(context, 0, what);
}

export const missingKey: ConformanceCheck = {
  id: ConformanceCheckId.missingKey,
  title: 'no Idempotency-Key header → 400, nothing executed',
  unavailableReason: always,
  async run(context) {
    const sent = await context.client.post({ key: null, input: context.target.input() });
    expectRejected(sent, 400, 'request without the header');
    expectNamesTheHeader(sent.body, 'request without the header');
    await expectExecutions(context, 0, 'request without the header');
    return '400 naming Idempotency-Key, 0 executions';
  },
};

/** Header values the contract refuses, and the key each would be stored under if the server took it. */
const malformedValues: ReadonlyArray<{ name: string; value: string }> = [
  { name: 'empty', value: '' },
  { name: `${MAX_KEY_LENGTH + 1} characters`, value: 'k'.repeat(MAX_KEY_LENGTH + 1) },
  { name: `${MAX_KEY_LENGTH + 1} characters, quoted`, value: `"${'k'.repeat(MAX_KEY_LENGTH + 1)}"` },
  { name: 'a tab inside', value: 'abc\tdef' },
  { name: 'a non-ASCII byte', value: 'abc\u00e9def' },
  { name: 'a list', value: 'a, b' },
  { name: 'a quoted list', value: '"a", "b"' },
  { name: 'an empty quoted string', value: '""' },
  { name: 'a quoted string with parameters', value: '"abc";p=1' },
  { name: 'an unterminated quoted string', value: '"abc' },
];

export const malformedKey: ConformanceCheck = {
  id: ConformanceCheckId.malformedKey,
  title:
    'a malformed Idempotency-Key (empty, too long, non-printable, a list, bad quoting) → 400, nothing executed',
  unavailableReason: always,
  async run(context) {
    const input = context.target.input();
    for (const { name, value } of malformedValues) {
      const sent = await context.client.post({ key: value, input });
      expectRejected(sent, 400, `key ${name}`);
      expectNamesTheHeader(sent.body, `key ${name}`);
      for (const candidate of new Set([value, value.trim(), value.replace(/^"|"$/g, '')]))
        await expectNothingStored(context, candidate, `key ${name}`);
    }
    await expectExecutions(context, 0, `${malformedValues.length} malformed keys`);
    return `${malformedValues.length} malformed values → 400 each, 0 executions`;
  },
};

export const noPrincipal: ConformanceCheck = {
  id: ConformanceCheckId.noPrincipal,
  title: 'no principal → 401, nothing executed or stored (the same key then runs for a real principal)',
  unavailableReason: always,
  async run(context) {
    const request = newRequest(context);
    const sent = await context.client.post({ ...request, from: 'anonymous' });
    await expectRefusedBeforeRunning(context, sent, 401, 'unauthenticated request');
    await sendExpectingFresh(context, request, 'the same key from principal A');
    return '401, 0 executions; then principal A ran the key';
  },
};

/** An input the contract refuses with 400, as one check. */
interface RefusedInput {
  id: ConformanceCheckId;
  title: string;
  /** Names the request with this input in failure details. */
  what: string;
  input<TInput>(target: ConformanceTarget<TInput>): unknown;
  /** When given, the check also counts exactly one execution once the valid input ran; this names the two. */
  countedAs?: string;
  /** The check's account of a pass. */
  passed: string;
}

/**
 * The check of an input the contract refuses with 400 before anything runs: sent with a new key, it executes
 * nothing and stores nothing, so the same key with a valid input then runs.
 */
function refusedInputCheck(refused: RefusedInput): ConformanceCheck {
  return {
    id: refused.id,
    title: refused.title,
    unavailableReason: always,
    async run(context) {
      const key = context.newKey();
      const sent = await context.client.post({ key, input: refused.input(context.target) });
      await expectRefusedBeforeRunning(context, sent, 400, refused.what);
      await expectNothingStored(context, key, refused.what);
      const valid = { key, input: context.target.input() };
      await sendExpectingFresh(context, valid, 'the same key with a valid input');
      if (refused.countedAs !== undefined) await expectExecutions(context, 1, refused.countedAs);
      return refused.passed;
    },
  };
}

export const invalidInput = refusedInputCheck({
  id: ConformanceCheckId.invalidInput,
  title: 'input that fails validation → 400, not stored: the same key with a valid input then runs',
  what: 'invalid input',
  input: (target) => target.invalidInput(),
  countedAs: 'invalid then valid input',
  passed: '400, nothing stored; the same key then ran once',
});

export const unfingerprintableInput = refusedInputCheck({
  id: ConformanceCheckId.unfingerprintableInput,
  title: 'input that cannot be fingerprinted (a lone surrogate) → 400, never a 5xx; nothing stored',
  what: 'input with a lone surrogate',
  // JSON.stringify escapes the lone surrogate as \ud800; the server parses it back into an ill-formed string.
  input: () => ({ idemConformance: '\ud800' }),
  passed: '400; the same key then ran',
});

export const batched: ConformanceCheck = {
  id: ConformanceCheckId.batched,
  title: 'the idempotent mutation in a batch of two → 400, nothing executed or stored',
  unavailableReason: (target) =>
    target.protocol === 'http' ? 'a plain HTTP target has no batches (tRPC targets only)' : null,
  async run(context) {
    const request = newRequest(context);
    const sent = await context.client.post({ ...request, batched: true });
    await expectRefusedBeforeRunning(context, sent, 400, 'batch of two');
    await expectNothingStored(context, request.key, 'batch of two');
    await sendExpectingFresh(context, request, 'the same key sent alone');
    return '400 for the batch, 0 executions; the same key alone then ran';
  },
};
