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
  checkoutIntentName,
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

test('a 422 to the re-sent payment keeps its key: "still being checked", its order shown, no second order', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await reloadMidPayment(page);
  await expect(page.getByTestId('payment-in-doubt')).toBeVisible();
  // The server finishes the first attempt on its own.
  const orderId = await settledOrderOfThisBrowser(context);

  // The stored copy no longer matches what was sent under the key.
  const intentName = await checkoutIntentName(page);
  const key = await page.evaluate((name) => {
    const record = JSON.parse(localStorage.getItem(name) ?? 'null');
    const sent = JSON.parse(record.sent.payload);
    sent.json.email = 'someone-else@example.com';
    localStorage.setItem(
      name,
      JSON.stringify({ ...record, sent: { ...record.sent, payload: JSON.stringify(sent) } }),
    );
    return record.key as string;
  }, intentName);
  await page.reload();
  // Every placeOrder answer from here on, with the key its request carried.
  const answers: Array<{ status: number; key: string | undefined }> = [];
  page.on('response', (response) => {
    if (response.url().includes('/api/trpc/checkout.placeOrder'))
      answers.push({ status: response.status(), key: response.request().headers()['idempotency-key'] });
  });
  const answered422 = () =>
    page.waitForResponse(
      (response) => response.url().includes('checkout.placeOrder') && response.status() === 422,
    );
  let rejected = answered422();
  await page.getByRole('button', { name: 'Check payment status' }).click();
  await rejected;

  await expect(page.getByTestId('payment-still-checking')).toBeVisible();
  await expect(page.getByTestId('payment-status')).toHaveText('unresolved');
  await expect(page.getByTestId('unresolved-intent-order').getByRole('link')).toHaveAttribute(
    'href',
    `/orders/${orderId}`,
  );
  // Pay again: the same key goes out (422 again), never a new one.
  rejected = answered422();
  await payButton(page).click();
  await rejected;
  await expect(page.getByTestId('payment-status')).toHaveText('unresolved');
  expect(answers.filter((answer) => answer.status === 422)).toHaveLength(2);
  expect(answers.map((answer) => answer.key)).toEqual(answers.map(() => key));
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
});
