/**
 * Issue 12, items 9c, 3a and 9b in the browser, on the production stack (`scripts/stack.ts e2e`: next start with
 * generated provider secrets, served over plain HTTP on 127.0.0.1): the guest session cookie is now Secure, and
 * Chromium still keeps it here, so a purchase works end to end — the session survives (the order is in this
 * browser's history), the web app and the provider agree on the generated API key (one charge) and on the
 * webhook secret (the signed webhook is accepted and the order ships); and /api/metrics answers only the token.
 */
import { expect, test } from '@playwright/test';
import {
  chargesForOrder,
  expectConfirmation,
  expectShipped,
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
  await expectShipped(page);
});

test('/api/metrics on the production stack: 401 for anyone, the metrics for the token', async ({
  request,
}) => {
  expect((await request.get('/api/metrics')).status()).toBe(401);
  const scrape = await request.get('/api/metrics', {
    headers: { authorization: `Bearer ${process.env.E2E_METRICS_TOKEN}` },
  });
  expect(scrape.status()).toBe(200);
  expect(await scrape.text()).toContain('idem_webhook_charge_anomalies_total');
});
