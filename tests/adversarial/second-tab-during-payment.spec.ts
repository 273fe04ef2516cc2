/**
 * Issue 12, item 9a (confirmed): a tab opened while another tab's payment is in flight. The checkout keeps the
 * intent in localStorage, which the tabs share, so the new tab reads the in-flight attempt — and, with no sign
 * that another tab is still waiting for it, showed it "in doubt" with "Start a new purchase": a new key and a
 * second order for the same cart. The fix: the paying tab keeps an `alive` mark in the record and the tabs hear
 * each other's writes (`storage` event); the new tab shows the payment in progress and offers no new purchase.
 *
 * CONTROL (injected from the test side): the second tab's localStorage reads drop the `alive` mark, i.e. the
 * store as it was before — and the attack succeeds: two orders, two charges.
 */
import { type BrowserContext, expect, type Page, test } from '@playwright/test';
import {
  chargesForOrder,
  expectConfirmation,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
  resetProviderKnobs,
  setProviderKnobs,
} from '../e2e/support.ts';

/** The checkout's intent record in localStorage (its intent id is `checkout`). */
const INTENT_STORAGE_KEY = 'idem:intent:checkout';

/** Resolves on the next write of `storageKey` by another tab (the `storage` event). */
async function nextWriteFromAnotherTab(page: Page, storageKey: string): Promise<void> {
  await page.evaluate(
    (name) =>
      new Promise<void>((resolve) => {
        const onStorage = (event: StorageEvent) => {
          if (event.key !== name) return;
          window.removeEventListener('storage', onStorage);
          resolve();
        };
        window.addEventListener('storage', onStorage);
      }),
    storageKey,
  );
}

test.afterEach(async () => {
  await resetProviderKnobs();
});

/** Tab 1 pays with a slow provider; returns tab 2, opened on the checkout while that payment is in flight. */
async function openSecondTabMidPayment(
  page: Page,
  context: BrowserContext,
  { withoutAliveMark = false, latencyMs = 6_000 } = {},
) {
  await readyToPay(page);
  await setProviderKnobs({ latencyMs });
  await payButton(page).click();
  await expect(page.getByTestId('payment-status')).toHaveText('sending');

  const second = await context.newPage();
  if (withoutAliveMark) {
    await second.addInitScript((intentStorageKey) => {
      const getItem = Storage.prototype.getItem;
      Storage.prototype.getItem = function (this: Storage, name: string) {
        const value = getItem.call(this, name);
        if (name !== intentStorageKey || value === null) return value;
        const record = JSON.parse(value);
        if (record?.sent) delete record.sent.alive;
        return JSON.stringify(record);
      };
    }, INTENT_STORAGE_KEY);
  }
  await second.goto('/checkout');
  return second;
}

test('CONTROL: without the in-flight mark, the second tab offers "Start a new purchase" → two orders', async ({
  page,
  context,
}) => {
  const second = await openSecondTabMidPayment(page, context, { withoutAliveMark: true });
  await expect(second.getByTestId('payment-in-doubt')).toBeVisible();
  // The paying tab refreshes its mark every 2 s by rewriting the record it read. A refresh that crosses the new
  // purchase writes the first intent back over it, and the second tab then pays with the first key (a replay of
  // the first order, seen once in CI). Starting right after a refresh keeps the two 2 s apart.
  await nextWriteFromAnotherTab(second, INTENT_STORAGE_KEY);
  await second.getByRole('button', { name: 'Start a new purchase' }).click();
  await second.getByLabel('Email for the receipt').fill('shopper@example.com');
  await payButton(second).click();

  const [first, other] = await Promise.all([expectConfirmation(page), expectConfirmation(second)]);
  expect(other).not.toBe(first);
  const orders = await ordersOfThisBrowser(context);
  expect(orders).toHaveLength(2);
  for (const orderId of orders) expect(await chargesForOrder(orderId)).toHaveLength(1);
});

test('PROTECTED: the second tab shows the payment in progress, offers no new purchase; one order', async ({
  page,
  context,
}) => {
  const second = await openSecondTabMidPayment(page, context);
  await expect(second.getByTestId('payment-in-other-tab')).toBeVisible();
  await expect(second.getByTestId('payment-status')).toHaveText('in-other-tab');
  await expect(second.getByTestId('payment-in-doubt')).toHaveCount(0);
  await expect(second.getByRole('button', { name: 'Start a new purchase' })).toHaveCount(0);

  const orderId = await expectConfirmation(page);
  // The first tab's outcome reaches the second: the intent is settled and its cart emptied.
  await expect(second.getByTestId('payment-in-other-tab')).toHaveCount(0);
  await expect(second.getByText('Your cart is empty.')).toBeVisible();
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});

test('PROTECTED: paying in the second tab meanwhile joins the same payment (same key): one order', async ({
  page,
  context,
}) => {
  // Short enough for the second tab's 409 retries (Retry-After: 1, five attempts) to outlast it.
  const second = await openSecondTabMidPayment(page, context, { latencyMs: 2_500 });
  await expect(second.getByTestId('payment-in-other-tab')).toBeVisible();
  await second.getByLabel('Email for the receipt').fill('shopper@example.com');
  await payButton(second).click();

  const [first, other] = await Promise.all([expectConfirmation(page), expectConfirmation(second)]);
  expect(other).toBe(first);
  expect(await ordersOfThisBrowser(context)).toEqual([first]);
  expect(await chargesForOrder(first)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});

test('a paying tab that closes mid-payment: the other tab shows the payment in doubt (checking is safe)', async ({
  page,
  context,
}) => {
  // Short enough for the check's 409 retries (Retry-After: 1, five attempts) to see the payment finish.
  const second = await openSecondTabMidPayment(page, context, { latencyMs: 2_500 });
  await expect(second.getByTestId('payment-in-other-tab')).toBeVisible();
  await page.close();
  // The closing tab removes its mark: the payment is now in doubt here, and checking re-sends the same key.
  await expect(second.getByTestId('payment-in-doubt')).toBeVisible();
  // The server finishes the closed tab's payment on its own; checking then replays it.
  await expect.poll(() => ordersOfThisBrowser(context), { timeout: 15_000 }).toHaveLength(1);
  const [placed] = await ordersOfThisBrowser(context);
  await expect
    .poll(async () => (await chargesForOrder(placed ?? '')).map((charge) => charge.status), {
      timeout: 15_000,
    })
    .toEqual(['succeeded']);
  await second.getByRole('button', { name: 'Check payment status' }).click();
  const orderId = await expectConfirmation(second);
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});
