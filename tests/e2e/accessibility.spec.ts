/**
 * Accessibility of every page a shopper or an admin uses: axe-core (WCAG 2.x A/AA rules) finds no serious or
 * critical violation on the catalog, cart, checkout, confirmation, order history, admin login, dashboard and a
 * key's trail; and a checkout can be done with the keyboard alone.
 */

import { randomUUID } from 'node:crypto';
import AxeBuilder from '@axe-core/playwright';
import { demoAdmin, demoUsers } from '@idem/dev-db/seed-data';
import { expect, type Page, test } from '@playwright/test';
import { addToCart, expectConfirmation, payButton, readyToPay } from './support.ts';

const [alice] = demoUsers;

/** The serious and critical violations axe finds on the page as it is now, as readable lines. */
async function seriousViolations(page: Page): Promise<string[]> {
  const { violations } = await new AxeBuilder({ page })
    .withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'])
    .analyze();
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map(
      (violation) =>
        `${violation.id} (${violation.impact}): ${violation.help} — ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`,
    );
}

test('shopper pages: no serious or critical axe violation', async ({ page }) => {
  await page.goto('/');
  expect(await seriousViolations(page), 'catalog').toEqual([]);

  await addToCart(page, 'Dotted Notebook');
  await page.goto('/cart');
  expect(await seriousViolations(page), 'cart').toEqual([]);

  await readyToPay(page);
  expect(await seriousViolations(page), 'checkout').toEqual([]);

  await payButton(page).click();
  await expectConfirmation(page);
  expect(await seriousViolations(page), 'confirmation').toEqual([]);

  await page.goto('/orders');
  expect(await seriousViolations(page), 'orders').toEqual([]);
});

test('admin pages: no serious or critical axe violation', async ({ page }) => {
  // One order through the API, so the dashboard lists a key whose trail can be opened.
  const placed = await page.request.post('/api/trpc/checkout.placeOrder', {
    headers: { authorization: `Bearer ${alice?.token}`, 'idempotency-key': randomUUID() },
    data: {
      json: { items: [{ sku: 'MUG-STONE', quantity: 1 }], email: 'a11y@example.com', cardToken: 'tok_visa' },
    },
  });
  expect(placed.status()).toBe(200);

  await page.goto('/admin/login');
  expect(await seriousViolations(page), 'admin login').toEqual([]);
  await page.getByLabel('Admin API token').fill(demoAdmin.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/admin$/);
  // The charts render after their first fetch: wait for them drawn and no section still loading.
  await expect(page.getByTestId('duplicates-chart').locator('svg.recharts-surface')).toBeVisible();
  await expect(page.getByText('Loading…')).toHaveCount(0);
  await expect(page.getByTestId('overview-tile').getByText('…', { exact: true })).toHaveCount(0);
  expect(await seriousViolations(page), 'dashboard').toEqual([]);

  await page.locator('a[href^="/admin/keys/"]').first().click();
  await expect(page).toHaveURL(/\/admin\/keys\//);
  expect(await seriousViolations(page), 'key trail').toEqual([]);
});

test('a checkout with the keyboard alone: add to cart, fill the form, pay', async ({ page }) => {
  await page.goto('/');
  // Tab to the product's button and press it, as a keyboard user would.
  const add = page.getByRole('button', { name: 'Add Dotted Notebook to cart' });
  await tabUntilFocused(page, add);
  await page.keyboard.press('Enter');
  await expect(page.getByTestId('cart-count')).toHaveText('1');

  await page.goto('/checkout');
  const email = page.getByLabel('Email for the receipt');
  await tabUntilFocused(page, email);
  await page.keyboard.type('keyboard@example.com');
  await page.keyboard.press('Tab');
  await expect(page.getByLabel('Test card')).toBeFocused();
  await page.keyboard.press('Tab');
  await expect(payButton(page)).toBeFocused();
  await page.keyboard.press('Enter');
  await expectConfirmation(page);
});

/** Presses Tab until `target` has the focus (at most 60 times): proves it is reachable in tab order. */
async function tabUntilFocused(page: Page, target: ReturnType<Page['locator']>) {
  for (let presses = 0; presses < 60; presses += 1) {
    if (await target.evaluate((element) => element === document.activeElement)) return;
    await page.keyboard.press('Tab');
  }
  throw new Error('never reached by Tab');
}
