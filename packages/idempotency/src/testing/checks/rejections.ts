/**
 * Status-table rows about requests refused before anything runs: no key, a malformed key, no principal, an
 * invalid or unfingerprintable input, a batch. Each must execute nothing and store nothing.
 */
import { MAX_KEY_LENGTH } from '../../protocol.ts';
import {
  type ConformanceCheck,
  ConformanceCheckId,
  expectExecutions,
  expectNothingStored,
  expectRejected,
  fail,
} from '../check.ts';
import { sendExpectingFresh } from './requests.ts';

const always = () => null;

/** The library's own messages name the header; a 400 that does not is the app refusing something else. */
function expectNamesTheHeader(body: string, what: string) {
  if (!body.includes('Idempotency-Key'))
    fail(`${what}: the 400 does not mention Idempotency-Key, so it is not the key being refused: ${body}`);
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
    const key = context.newKey();
    const input = context.target.input();
    const sent = await context.client.post({ key, input, from: 'anonymous' });
    expectRejected(sent, 401, 'unauthenticated request');
    await expectExecutions(context, 0, 'unauthenticated request');
    await sendExpectingFresh(context, { key, input }, 'the same key from principal A');
    return '401, 0 executions; then principal A ran the key';
  },
};

export const invalidInput: ConformanceCheck = {
  id: ConformanceCheckId.invalidInput,
  title: 'input that fails validation → 400, not stored: the same key with a valid input then runs',
  unavailableReason: always,
  async run(context) {
    const key = context.newKey();
    const sent = await context.client.post({ key, input: context.target.invalidInput() });
    expectRejected(sent, 400, 'invalid input');
    await expectExecutions(context, 0, 'invalid input');
    await expectNothingStored(context, key, 'invalid input');
    await sendExpectingFresh(
      context,
      { key, input: context.target.input() },
      'the same key with a valid input',
    );
    await expectExecutions(context, 1, 'invalid then valid input');
    return '400, nothing stored; the same key then ran once';
  },
};

export const unfingerprintableInput: ConformanceCheck = {
  id: ConformanceCheckId.unfingerprintableInput,
  title: 'input that cannot be fingerprinted (a lone surrogate) → 400, never a 5xx; nothing stored',
  unavailableReason: always,
  async run(context) {
    const key = context.newKey();
    // JSON.stringify escapes the lone surrogate as \ud800; the server parses it back into an ill-formed string.
    const sent = await context.client.post({ key, input: { idemConformance: '\ud800' } });
    expectRejected(sent, 400, 'input with a lone surrogate');
    await expectExecutions(context, 0, 'input with a lone surrogate');
    await expectNothingStored(context, key, 'input with a lone surrogate');
    await sendExpectingFresh(
      context,
      { key, input: context.target.input() },
      'the same key with a valid input',
    );
    return '400; the same key then ran';
  },
};

export const batched: ConformanceCheck = {
  id: ConformanceCheckId.batched,
  title: 'the idempotent mutation in a batch of two → 400, nothing executed or stored',
  unavailableReason: (target) =>
    target.protocol === 'http' ? 'a plain HTTP target has no batches (tRPC targets only)' : null,
  async run(context) {
    const key = context.newKey();
    const input = context.target.input();
    const sent = await context.client.post({ key, input, batched: true });
    expectRejected(sent, 400, 'batch of two');
    await expectExecutions(context, 0, 'batch of two');
    await expectNothingStored(context, key, 'batch of two');
    await sendExpectingFresh(context, { key, input }, 'the same key sent alone');
    return '400 for the batch, 0 executions; the same key alone then ran';
  },
};
