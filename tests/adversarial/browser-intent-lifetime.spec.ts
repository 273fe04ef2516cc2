/**
 * Issue 12: an intent the browser has held too long is checked ("what happened to my order?"), never re-sent.
 * The checkout's intent record is aged in localStorage (an old `createdAt`) instead of waiting two days. The
 * CONTROL — the previous hook, which re-sends an intent of any age and so pays again once the server has
 * forgotten the key — is browser-intent-lifetime.test.ts (vitest, same directory): 2 executions there, 1 here.
 */
import { expect, type Page, test } from '@playwright/test';
import {
  chargesForOrder,
  checkoutIntentName,
  countPlaceOrderRequests,
  expectConfirmation,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
  reloadMidPayment,
  resetProviderKnobs,
  settledOrderOfThisBrowser,
} from '../e2e/support.ts';

test.afterEach(async () => {
  await resetProviderKnobs();
});

/** Makes the checkout's intent look first sent 49 hours ago (the checkout re-sends for 48). */
async function ageIntentByTwoDays(page: Page) {
  const intentName = await checkoutIntentName(page);
  await page.evaluate((name) => {
    const record = JSON.parse(localStorage.getItem(name) ?? 'null');
    if (!record?.sent) throw new Error('no unresolved intent to age');
    localStorage.setItem(name, JSON.stringify({ ...record, createdAt: Date.now() - 49 * 3_600_000 }));
  }, intentName);
}

test('an old intent whose payment went through: the form shows its order and sends nothing', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await reloadMidPayment(page);
  await expect(page.getByTestId('payment-in-doubt')).toBeVisible();
  // The server finishes the first attempt on its own.
  const orderId = await settledOrderOfThisBrowser(context);

  await ageIntentByTwoDays(page);
  const placeOrderRequests = countPlaceOrderRequests(page);
  const intentChecks: Array<{ method: string; url: string; body: string | null }> = [];
  page.on('request', (request) => {
    if (request.url().includes('orders.forIntent'))
      intentChecks.push({ method: request.method(), url: request.url(), body: request.postData() });
  });
  await page.reload();

  await expect(page.getByTestId('payment-expired')).toBeVisible();
  // The check carries the payment's payload (the receipt email): in a POST body, never in the URL.
  expect(intentChecks.length).toBeGreaterThanOrEqual(1);
  for (const check of intentChecks) {
    expect(check.method).toBe('POST');
    expect(check.url).not.toContain('shopper');
    expect(check.body).toContain('shopper@example.com');
  }
  await expect(page.getByTestId('expired-intent-order').getByRole('link')).toHaveAttribute(
    'href',
    `/orders/${orderId}`,
  );
  await expect(page.getByTestId('payment-status')).toHaveText('expired');
  await expect(payButton(page)).toBeDisabled();
  await expect(page.getByRole('button', { name: 'Check payment status' })).toHaveCount(0);
  expect(placeOrderRequests()).toBe(0);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});

test('an old intent that never reached the server: "no order was placed", and starting over buys once', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  // Every attempt fails before the server sees it.
  await page.route('**/api/trpc/checkout.placeOrder', (route) => route.abort('connectionreset'));
  await payButton(page).click();
  // In doubt once the link's retries run out: its waits add up to 22.5 s at the most.
  await expect(page.getByTestId('payment-in-doubt')).toBeVisible({ timeout: 40_000 });
  await page.unroute('**/api/trpc/checkout.placeOrder');

  await ageIntentByTwoDays(page);
  await page.reload();
  await expect(page.getByTestId('expired-intent-no-order')).toBeVisible();
  await page.getByRole('button', { name: 'Start a new purchase' }).click();
  await expect(page.getByTestId('payment-expired')).toHaveCount(0);

  await page.getByLabel('Email for the receipt').fill('shopper@example.com');
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});
