/**
 * Issue 12, items 9c and 3a in the browser, on the production stack (`scripts/stack.ts e2e`: next start with
 * generated provider secrets, served over plain HTTP on 127.0.0.1): the guest session cookie is now Secure, and
 * Chromium still keeps it here, so a purchase works end to end — the session survives (the order is in this
 * browser's history), the web app and the provider agree on the generated API key (one charge) and on the
 * webhook secret (the signed webhook is accepted and the order ships).
 */
import { expect, test } from '@playwright/test';
import {
  chargesForOrder,
  expectConfirmation,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
} from '../e2e/support.ts';

test('Secure session cookie on http://127.0.0.1, and a purchase that ships', async ({ page, context }) => {
  await page.goto('/');
  const session = (await context.cookies()).find((cookie) => cookie.name === 'idem_session');
  expect(session).toMatchObject({ secure: true, httpOnly: true, sameSite: 'Lax' });

  await readyToPay(page);
  await payButton(page).click();
  const orderId = await expectConfirmation(page);

  expect(await ordersOfThisBrowser(context)).toContain(orderId);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
  await expect
    .poll(
      async () => {
        await page.reload();
        return page.getByTestId('order-status').textContent();
      },
      { timeout: 30_000, intervals: [500] },
    )
    .toBe('Shipped');
});
