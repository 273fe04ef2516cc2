/**
 * After the pay call, the order's life is driven by at-least-once messages: whichever transaction marks the order
 * paid (the pay call's when the provider answers it, else the provider's signed webhook's) writes its fulfilment
 * job; the pg-boss worker ships it.
 */
import { expect, test } from '@playwright/test';
import {
  expectConfirmation,
  flushProviderWebhooks,
  fulfilmentJobStates,
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

test('the pay call queues fulfilment itself: the order ships while the provider holds its webhook; duplicated deliveries add nothing', async ({
  page,
  context,
}) => {
  await setProviderKnobs({ webhookHold: true, webhookDuplicates: 3 });
  await readyToPay(page);
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  // The pay call's transaction wrote the job with the payment: it ships though the provider holds the webhook.
  await expect(page.getByTestId('order-status')).toHaveText('Shipped', { timeout: 20_000 });
  await expect.poll(() => fulfilmentJobStates(orderId), { timeout: 20_000 }).toEqual(['completed']);

  // The event goes out with three copies at once; the flush returns when all four have been answered.
  const deliveries = await flushProviderWebhooks('forward');
  expect(deliveries).toEqual([expect.objectContaining({ type: 'charge.succeeded', delivered: true })]);
  // Four deliveries of an event for an order already paid: no second job, so no second receipt.
  expect(await fulfilmentJobStates(orderId)).toEqual(['completed']);
  await page.reload();
  await expect(page.getByTestId('email-sent')).toHaveText(['✉ Receipt emailed to shopper@example.com']);
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
});
