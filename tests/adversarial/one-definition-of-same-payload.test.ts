// @vitest-environment happy-dom
/**
 * Issue 12, item 5: re-sending an unresolved intent must never run the mutation twice. The browser stores the
 * payload it sent, and after a reload "Check payment status" re-sends it under the same key. If the browser's
 * idea of "the same payload" differs from the server's fingerprint (superjson sends `{ coupon: undefined }`,
 * plain JSON storage drops it), the re-send is a 422; a client that then retires the key runs the next submit
 * under a new key: a second execution.
 *
 * The user's script, the same in every run: Pay (the response is lost), reload, "Check payment status" (re-send
 * the stored payload); if that did not end in an order, Pay again.
 */

import type { Database } from '@idem/db';
import { retryReasonOf } from '@idem/idempotency/client';
import { jsonSerializer } from '@idem/idempotency/react';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createReloadHarness,
  linkTransformer,
  type memoryStorage,
  type OrderInput,
  unmountTabs,
} from '../../packages/idempotency/test/react-reload-harness.ts';
import { connect } from '../../packages/idempotency/test/support/db.ts';

let db: Database;
beforeAll(() => {
  db = connect();
});
afterAll(async () => {
  await db.$disconnect();
});
afterEach(() => {
  unmountTabs();
});

const withEmptyCoupon: OrderInput = { sku: 'DESK-LAMP', coupon: undefined };
const succeeded = (status: string) => status === 'succeeded' || status === 'replayed';

/**
 * CONTROL — the hook's decisions before the fix, restated: the payload stored as JSON, two payloads equal when
 * their defined properties are (an `undefined` property counts as absent), and any final error (a 422
 * included) retires the key.
 */
function previousHookDecisions(
  harness: ReturnType<typeof createReloadHarness>,
  storage: ReturnType<typeof memoryStorage>,
) {
  const name = 'idem:intent:checkout';
  const definedEntries = (value: object) => Object.entries(value).filter(([, item]) => item !== undefined);
  const structurallyEqual = (a: object, b: object) =>
    JSON.stringify(definedEntries(a).sort()) === JSON.stringify(definedEntries(b).sort());
  return async function submit(input: OrderInput): Promise<string> {
    const record = JSON.parse(storage.getItem(name) ?? 'null') ?? { key: crypto.randomUUID(), sent: null };
    const original = record.sent === null ? null : (JSON.parse(record.sent) as OrderInput);
    const payload = original && !structurallyEqual(original, input) ? original : input;
    storage.setItem(name, JSON.stringify({ ...record, sent: JSON.stringify(payload) }));
    try {
      await harness.client.checkout.placeOrder.mutate(payload, { context: { idempotencyKey: record.key } });
      storage.removeItem(name);
      return 'succeeded';
    } catch (error) {
      if (retryReasonOf(error)) return 'unknown';
      storage.removeItem(name);
      return 'failed';
    }
  };
}

describe('item 5: one definition of "same payload" (browser ⇄ server fingerprint)', () => {
  it('CONTROL: the previous equality and 422 handling → the mutation runs twice', async () => {
    const harness = createReloadHarness(db);
    const submit = previousHookDecisions(harness, harness.storage);

    harness.loseNextResponse();
    expect(await submit(withEmptyCoupon)).toBe('unknown');
    // Reload: the stored payload is what JSON kept of it.
    const stored = JSON.parse(JSON.parse(harness.storage.items.get('idem:intent:checkout') ?? '{}').sent);
    const checked = await submit(stored);
    expect(checked).toBe('failed');
    expect(harness.statuses.at(-1)).toBe(422);
    expect(await submit(withEmptyCoupon)).toBe('succeeded');

    expect(harness.executions()).toBe(2);
  });

  it('PROTECTED: the hook stores and compares the transformer wire form → the check replays, one execution', async () => {
    const harness = createReloadHarness(db);
    const tab = harness.mountHook({ transformer: linkTransformer });
    harness.loseNextResponse();
    expect((await tab.submit(withEmptyCoupon)).status).toBe('unknown');
    tab.unmount();

    const reloaded = harness.mountHook({ transformer: linkTransformer });
    const inDoubt = reloaded.result.current.inDoubt;
    expect(inDoubt?.payload).toStrictEqual(withEmptyCoupon);
    const checked = await reloaded.submit(inDoubt?.payload ?? withEmptyCoupon);
    expect(checked.status).toBe('replayed');
    if (!succeeded(checked.status)) await reloaded.submit(withEmptyCoupon);

    expect(harness.statuses).toEqual([200, 200]);
    expect(harness.executions()).toBe(1);
  });

  it('PROTECTED: even with the wrong wire form configured, a 422 keeps the key ("unresolved") → one execution', async () => {
    const harness = createReloadHarness(db);
    // The hook is told plain JSON while the link sends superjson: its stored copy loses the undefined property.
    const misconfigured = { serializer: jsonSerializer };
    const tab = harness.mountHook(misconfigured);
    harness.loseNextResponse();
    expect((await tab.submit(withEmptyCoupon)).status).toBe('unknown');
    const key = tab.result.current.key;
    tab.unmount();

    const reloaded = harness.mountHook(misconfigured);
    const checked = await reloaded.submit(reloaded.result.current.inDoubt?.payload ?? withEmptyCoupon);
    expect(harness.statuses.at(-1)).toBe(422);
    expect(checked.status).toBe('unresolved');
    expect(reloaded.result.current.key).toBe(key);
    expect(reloaded.result.current.inDoubt).not.toBeNull();
    if (!succeeded(checked.status)) {
      const again = await reloaded.submit(withEmptyCoupon);
      expect(again.status).toBe('replayed');
    }

    expect(harness.executions()).toBe(1);
  });
});
