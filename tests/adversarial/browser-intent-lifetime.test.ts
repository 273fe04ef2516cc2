// @vitest-environment happy-dom
/**
 * Issue 12: an intent the browser has held too long is checked ("what happened to my order?"), never re-sent as
 * a new charge. Once the server has forgotten a key (past its retention), a re-send under it runs as a new
 * request: the browser must stop re-sending before that. The record is aged in storage (an old `createdAt`) and
 * the server's key row past its expiry, instead of waiting.
 */

import type { Database } from '@idem/db';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createReloadHarness,
  linkTransformer,
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

const HOUR = 3_600_000;
const order: OrderInput = { sku: 'DESK-LAMP' };

/** Pay with the response lost, then let two days pass for the browser's record and for the server's key. */
async function payThenAgeTwoDays(
  harness: ReturnType<typeof createReloadHarness>,
  options: { maxIntentAgeMs: number },
) {
  const tab = harness.mountHook({ transformer: linkTransformer, ...options });
  harness.loseNextResponse();
  expect((await tab.submit(order)).status).toBe('unknown');
  const key = tab.result.current.key;
  tab.unmount();

  const name = 'idem:intent:checkout';
  const record = JSON.parse(harness.storage.items.get(name) ?? 'null');
  harness.storage.setItem(name, JSON.stringify({ ...record, createdAt: Date.now() - 49 * HOUR }));
  await db.$executeRawUnsafe(
    `update idempotency_keys set expires_at = now() - interval '1 hour' where scope = $1`,
    harness.principal,
  );
  return { key };
}

describe('browser intent lifetime: an old intent is checked, never re-sent', () => {
  it('CONTROL: without a lifetime (the previous hook), the old intent is re-sent and runs again', async () => {
    const harness = createReloadHarness(db);
    await payThenAgeTwoDays(harness, { maxIntentAgeMs: Number.POSITIVE_INFINITY });

    const reloaded = harness.mountHook({
      transformer: linkTransformer,
      maxIntentAgeMs: Number.POSITIVE_INFINITY,
    });
    expect(reloaded.result.current.inDoubt).toMatchObject({ expired: false });
    const checked = await reloaded.submit(reloaded.result.current.inDoubt?.payload ?? order);

    expect(checked.status).toBe('succeeded'); // not a replay: the server ran it again
    expect(harness.executions()).toBe(2);
  });

  it('PROTECTED: past maxIntentAgeMs the hook reports it expired and sends nothing', async () => {
    const harness = createReloadHarness(db);
    const { key } = await payThenAgeTwoDays(harness, { maxIntentAgeMs: 48 * HOUR });
    const sentBefore = harness.statuses.length;

    const reloaded = harness.mountHook({ transformer: linkTransformer, maxIntentAgeMs: 48 * HOUR });
    expect(reloaded.result.current.inDoubt).toMatchObject({ payload: order, expired: true });
    const checked = await reloaded.submit(reloaded.result.current.inDoubt?.payload ?? order);

    expect(checked).toMatchObject({ status: 'expired', input: order });
    expect(reloaded.result.current.key).toBe(key); // kept, for "what happened to my order?"
    expect(harness.statuses.length).toBe(sentBefore);
    expect(harness.executions()).toBe(1);
  });

  it('the age counts from the first send: a key made long ago but never sent is sent normally', async () => {
    const harness = createReloadHarness(db);
    const tab = harness.mountHook({ transformer: linkTransformer, maxIntentAgeMs: 48 * HOUR });
    const name = 'idem:intent:checkout';
    const record = JSON.parse(harness.storage.items.get(name) ?? 'null');
    harness.storage.setItem(name, JSON.stringify({ ...record, createdAt: Date.now() - 49 * HOUR }));

    expect((await tab.submit(order)).status).toBe('succeeded');
    expect(harness.executions()).toBe(1);
  });
});
