import { expect, test } from '@playwright/test';
import { addToCart, chargesForOrder } from './support.ts';

test('browse, add to cart, pay, and see the confirmation', async ({ page }) => {
  await page.goto('/');
  await expect(page.getByRole('heading', { name: 'Goods for careful people' })).toBeVisible();
  await addToCart(page, 'Stoneware Mug');
  await addToCart(page, 'Stoneware Mug');
  await addToCart(page, 'Dotted Notebook');
  await expect(page.getByTestId('cart-count')).toHaveText('3');

  await page.getByRole('link', { name: /Cart, 3 items/ }).click();
  await expect(page.getByTestId('cart-line-MUG-STONE')).toBeVisible();
  // 2 × $18.00 + 1 × $14.00, priced from the server's catalog.
  await expect(page.getByTestId('cart-subtotal')).toHaveText('$50.00');
  await page.getByRole('link', { name: 'Go to checkout' }).click();

  await page.getByLabel('Email for the receipt').fill('shopper@example.com');
  await page.getByLabel('Test card').selectOption('tok_visa');
  await page.getByRole('button', { name: 'Pay $50.00' }).click();

  await expect(page.getByRole('heading', { name: /your order is confirmed/ })).toBeVisible();
  // Paid by the pay call; the webhook and the worker may already have shipped it.
  await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Shipped)$/);
  await expect(page.getByTestId('order-total')).toHaveText('$50.00');
  await expect(page.getByTestId('cart-count')).toHaveText('0');

  const orderId = (await page.getByTestId('order-id').textContent())?.trim() ?? '';
  expect(orderId).toMatch(/^[0-9a-f-]{36}$/);
  const charges = await chargesForOrder(orderId);
  expect(charges).toEqual([expect.objectContaining({ status: 'succeeded', amount: 5000 })]);

  await page.getByRole('link', { name: 'All orders' }).click();
  await expect(page.getByTestId('order-row')).toHaveCount(1);
});

test('a declined card shows a clear error and creates no paid order', async ({ page }) => {
  await page.goto('/');
  await addToCart(page, 'Brass Pen');
  await page.goto('/checkout');
  await page.getByLabel('Email for the receipt').fill('declined@example.com');
  await page.getByLabel('Test card').selectOption('tok_chargeDeclined');
  await page.getByRole('button', { name: 'Pay $42.00' }).click();

  await expect(page.getByTestId('checkout-error')).toHaveText('Your card was declined.');
  // Still on checkout, the cart kept, the form usable again.
  await expect(page).toHaveURL(/\/checkout$/);
  await expect(page.getByTestId('cart-count')).toHaveText('1');
  await expect(page.getByRole('button', { name: 'Pay $42.00' })).toBeEnabled();

  await page.goto('/orders');
  const rows = page.getByTestId('order-row');
  await expect(rows).toHaveCount(1);
  await expect(rows.first().getByTestId('order-status')).toHaveText('Payment failed');
});

test('the form explains bad input before anything is sent', async ({ page }) => {
  await page.goto('/');
  await addToCart(page, 'Canvas Tote');
  await page.goto('/checkout');
  await page.getByLabel('Email for the receipt').fill('not-an-email');
  await page.getByRole('button', { name: /^Pay / }).click();
  await expect(page.getByTestId('checkout-error')).toHaveText('Enter a valid email address.');
});
