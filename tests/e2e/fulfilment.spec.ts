/**
 * After the pay call, the order's life is driven by at-least-once messages: the provider's signed webhook
 * confirms the payment and enqueues fulfilment in the same transaction; the pg-boss worker ships it.
 */
import { expect, test } from '@playwright/test';
import {
  expectConfirmation,
  flushProviderWebhooks,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
  resetProviderKnobs,
  setProviderKnobs,
} from './support.ts';

test.afterEach(async () => {
  await resetProviderKnobs();
});

test('after paying, the confirmation page shows the order being shipped by the webhook and the worker', async ({
  page,
}) => {
  await readyToPay(page);
  await payButton(page).click();
  await expectConfirmation(page);
  await expect(page.getByTestId('order-status')).toHaveText('Shipped', { timeout: 20_000 });
  await expect(page.getByRole('list', { name: 'Order progress' }).getByText('Shipped')).toBeVisible();
});

test('nothing ships until the webhook arrives; duplicated deliveries still ship once', async ({
  page,
  context,
}) => {
  await setProviderKnobs({ webhookHold: true, webhookDuplicates: 3 });
  await readyToPay(page);
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  await expect(page.getByTestId('order-status')).toHaveText('Paid');
  await page.waitForTimeout(2_500); // the worker is running; without the webhook there is no job
  await expect(page.getByTestId('order-status')).toHaveText('Paid');

  await flushProviderWebhooks('forward');
  await expect(page.getByTestId('order-status')).toHaveText('Shipped', { timeout: 20_000 });
  await expect(page.getByTestId('email-sent')).toHaveText(['✉ Receipt emailed to shopper@example.com']);
  await page.waitForTimeout(1_500); // late duplicates would show up as a second receipt
  await page.reload();
  await expect(page.getByTestId('email-sent')).toHaveCount(1);
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
});
