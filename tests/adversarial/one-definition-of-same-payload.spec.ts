/**
 * Issue 12, item 5, in the browser: when the server holds another payment under the intent's key (a re-send
 * answered 422), the checkout keeps the key and says "this payment is still being checked" — with the order
 * that key made, found through `orders.forIntent` — instead of retiring the key and letting the next Pay run
 * under a new one. The browser's stored copy of the payload is altered to provoke the 422. The CONTROL (the
 * previous hook: 422 → key retired → the next submit runs again, 2 executions) is
 * one-definition-of-same-payload.test.ts in this directory.
 */
import { expect, test } from '@playwright/test';
import {
  chargesForOrder,
  countPlaceOrderRequests,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
  resetProviderKnobs,
  setProviderKnobs,
} from '../e2e/support.ts';

test.afterEach(async () => {
  await resetProviderKnobs();
});

test('a 422 to the re-sent payment keeps its key: "still being checked", its order shown, no second order', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await setProviderKnobs({ latencyMs: 2_500 });
  await payButton(page).click();
  await expect(page.getByTestId('payment-status')).toHaveText('sending');
  await page.waitForTimeout(500); // the request is at the server, the provider is slow
  await page.reload();
  await expect(page.getByTestId('payment-in-doubt')).toBeVisible();
  await expect.poll(() => ordersOfThisBrowser(context), { timeout: 15_000 }).toHaveLength(1);
  const [orderId] = await ordersOfThisBrowser(context);

  // The stored copy no longer matches what was sent under the key.
  await page.evaluate(() => {
    const name = 'idem:intent:checkout';
    const record = JSON.parse(localStorage.getItem(name) ?? 'null');
    const sent = JSON.parse(record.sent.payload);
    sent.json.email = 'someone-else@example.com';
    localStorage.setItem(
      name,
      JSON.stringify({ ...record, sent: { ...record.sent, payload: JSON.stringify(sent) } }),
    );
  });
  await page.reload();
  const placeOrderRequests = countPlaceOrderRequests(page);
  await page.getByRole('button', { name: 'Check payment status' }).click();

  await expect(page.getByTestId('payment-still-checking')).toBeVisible();
  await expect(page.getByTestId('payment-status')).toHaveText('unresolved');
  await expect(page.getByTestId('unresolved-intent-order').getByRole('link')).toHaveAttribute(
    'href',
    `/orders/${orderId}`,
  );
  // Pay again: the same key goes out (422 again), never a new one.
  await payButton(page).click();
  await expect(page.getByTestId('payment-status')).toHaveText('unresolved');
  expect(placeOrderRequests()).toBe(2);
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
  expect(await chargesForOrder(orderId ?? '')).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});
