/**
 * Issue 12, item 9a (confirmed): a tab opened while another tab's payment is in flight. The checkout keeps the
 * intent in localStorage, which the tabs share, so the new tab reads the in-flight attempt — and, with no sign
 * that another tab is still waiting for it, showed it "in doubt" with "Start a new purchase": a new key and a
 * second order for the same cart. The fix: the paying tab keeps a sign of life beside the record
 * (`idem:alive:<intent>:<key>`, refreshed every 2 s) and the tabs hear each other's writes (`storage` event); the
 * new tab shows the payment in progress and offers no new purchase.
 *
 * The first tab's payment stays in flight by gates the test opens, never by a latency: its request waits at
 * the browser while the second tab loads (`holdPaymentInBrowser`: no server timer runs meanwhile), and where the
 * server must be running it, its charge waits at the provider (`holdCharges`) until the test has seen what it
 * needs.
 *
 * CONTROL (injected from the test side): the second tab's localStorage reads find no sign of life, i.e. a store
 * without one — and the attack succeeds: two orders, two charges.
 */
import { type BrowserContext, expect, type Page, test } from '@playwright/test';
import {
  CHECKOUT_MARK_PREFIX,
  chargesForOrder,
  chargesHeld,
  expectConfirmation,
  holdCharges,
  holdPaymentInBrowser,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
  releaseCharges,
  resetProviderKnobs,
  settledOrderOfThisBrowser,
} from '../e2e/support.ts';

test.afterEach(async () => {
  await resetProviderKnobs();
});

/**
 * Tab 1 pays; its request waits at the browser (`send()` lets it go). Returns tab 2, opened on the checkout
 * while that payment is in flight.
 */
async function openSecondTabMidPayment(
  page: Page,
  context: BrowserContext,
  { withoutAliveMark = false } = {},
) {
  await readyToPay(page);
  const payment = await holdPaymentInBrowser(page);
  await payButton(page).click();
  await payment.waiting;
  await expect(page.getByTestId('payment-status')).toHaveText('sending');

  const second = await context.newPage();
  if (withoutAliveMark) {
    await second.addInitScript((markPrefix) => {
      const getItem = Storage.prototype.getItem;
      Storage.prototype.getItem = function (this: Storage, name: string) {
        return name.startsWith(markPrefix) ? null : getItem.call(this, name);
      };
    }, CHECKOUT_MARK_PREFIX);
  }
  await second.goto('/checkout');
  return { second, sendFirst: payment.send };
}

/** The placeOrder answer `page` gets next with HTTP status `status`. */
const placeOrderAnswer = (page: Page, status: number) =>
  page.waitForResponse(
    (response) => response.url().includes('checkout.placeOrder') && response.status() === status,
  );

test('CONTROL: without the in-flight mark, the second tab offers "Start a new purchase" → two orders', async ({
  page,
  context,
}) => {
  const { second, sendFirst } = await openSecondTabMidPayment(page, context, { withoutAliveMark: true });
  await expect(second.getByTestId('payment-in-doubt')).toBeVisible();
  // Tab 1's refreshes write only its mark, never the record: they cannot bring the first key back meanwhile.
  await second.getByRole('button', { name: 'Start a new purchase' }).click();

  await second.getByLabel('Email for the receipt').fill('shopper@example.com');
  await payButton(second).click();
  const other = await expectConfirmation(second);
  // The first payment was still waiting all along; now it goes through too.
  sendFirst();
  const first = await expectConfirmation(page);
  expect(other).not.toBe(first);
  const orders = await ordersOfThisBrowser(context);
  expect(orders).toHaveLength(2);
  for (const orderId of orders) expect(await chargesForOrder(orderId)).toHaveLength(1);
});

test('PROTECTED: the second tab shows the payment in progress, offers no new purchase; one order', async ({
  page,
  context,
}) => {
  const { second, sendFirst } = await openSecondTabMidPayment(page, context);
  await expect(second.getByTestId('payment-in-other-tab')).toBeVisible();
  await expect(second.getByTestId('payment-status')).toHaveText('in-other-tab');
  await expect(second.getByTestId('payment-in-doubt')).toHaveCount(0);
  await expect(second.getByRole('button', { name: 'Start a new purchase' })).toHaveCount(0);

  sendFirst();
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
  const { second, sendFirst } = await openSecondTabMidPayment(page, context);
  await expect(second.getByTestId('payment-in-other-tab')).toBeVisible();
  await second.getByLabel('Email for the receipt').fill('shopper@example.com');

  // Tab 1's payment goes to the server and is held there, charging, while tab 2 pays.
  await holdCharges();
  sendFirst();
  await chargesHeld(1);
  const conflict = placeOrderAnswer(second, 409);
  await payButton(second).click();
  // Tab 2's attempt found tab 1's in flight under the same key (409: wait and ask again)…
  await conflict;
  // …and once that one is answered, tab 2's next attempt gets its answer.
  await releaseCharges();

  const [first, other] = await Promise.all([expectConfirmation(page), expectConfirmation(second)]);
  expect(other).toBe(first);
  expect(await ordersOfThisBrowser(context)).toEqual([first]);
  expect(await chargesForOrder(first)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});

test('a paying tab that closes mid-payment: the other tab shows the payment in doubt (checking is safe)', async ({
  page,
  context,
}) => {
  const { second, sendFirst } = await openSecondTabMidPayment(page, context);
  await expect(second.getByTestId('payment-in-other-tab')).toBeVisible();
  // Tab 1's payment reaches the server, which is charging it when the tab closes.
  await holdCharges();
  sendFirst();
  await chargesHeld(1);
  await page.close();
  // The server finishes the closed tab's payment on its own.
  await releaseCharges();
  // The closing tab removed its mark: the payment is now in doubt here, and checking re-sends the same key.
  await expect(second.getByTestId('payment-in-doubt')).toBeVisible();
  const placed = await settledOrderOfThisBrowser(context);
  await second.getByRole('button', { name: 'Check payment status' }).click();
  const orderId = await expectConfirmation(second);
  expect(orderId).toBe(placed);
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});
