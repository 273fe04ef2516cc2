/**
 * After the pay call, the order's life is driven by at-least-once messages: the provider's signed webhook
 * confirms the payment and enqueues fulfilment in the same transaction; the pg-boss worker ships it.
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

test('nothing ships until the webhook arrives; duplicated deliveries still ship once', async ({
  page,
  context,
}) => {
  await setProviderKnobs({ webhookHold: true, webhookDuplicates: 3 });
  await readyToPay(page);
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  await expect(page.getByTestId('order-status')).toHaveText('Paid');
  // The pay call has committed (its answer is on screen) and queued no job: only the webhook's transaction
  // queues fulfilment, and the provider holds it. With no job, nothing can ship, however long one waits.
  expect(await fulfilmentJobStates(orderId)).toEqual([]);
  await expect(page.getByTestId('order-status')).toHaveText('Paid');

  // The event goes out with three copies at once; the flush returns when all four have been answered.
  const deliveries = await flushProviderWebhooks('forward');
  expect(deliveries).toEqual([expect.objectContaining({ type: 'charge.succeeded', delivered: true })]);
  // Four deliveries, one job: the event id is claimed once.
  expect(await fulfilmentJobStates(orderId)).toHaveLength(1);
  await expect(page.getByTestId('order-status')).toHaveText('Shipped', { timeout: 20_000 });
  // Once that one job has finished, no delivery and no job is left that could write a second receipt.
  await expect.poll(() => fulfilmentJobStates(orderId), { timeout: 20_000 }).toEqual(['completed']);
  await page.reload();
  await expect(page.getByTestId('email-sent')).toHaveText(['✉ Receipt emailed to shopper@example.com']);
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
});
