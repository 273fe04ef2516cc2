import { type BrowserContext, expect, type Page } from '@playwright/test';

export const providerUrl = `http://127.0.0.1:${process.env.E2E_PROVIDER_PORT ?? 4100}`;
// Generated per run by playwright.config.ts and given to the stack (a production build refuses the demo key).
const providerAuth = { authorization: `Bearer ${process.env.E2E_PROVIDER_SECRET_KEY}` };

export async function chargesForOrder(orderId: string): Promise<Array<{ status: string; amount: number }>> {
  const response = await fetch(`${providerUrl}/v1/charges?order=${encodeURIComponent(orderId)}`, {
    headers: providerAuth,
  });
  expect(response.ok).toBe(true);
  return ((await response.json()) as { data: Array<{ status: string; amount: number }> }).data;
}

/** Arms the provider's fault knobs (enabled only in the e2e stack). */
export async function setProviderKnobs(knobs: {
  latencyMs?: number;
  chargeHold?: boolean;
  failNext?: number;
  dropResponseNext?: number;
  webhookHold?: boolean;
  webhookDuplicates?: number;
}) {
  const response = await fetch(`${providerUrl}/__knobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(knobs),
  });
  expect(response.ok).toBe(true);
}

/** Resets every knob and lets go of any charge response still held. */
export async function resetProviderKnobs() {
  await fetch(`${providerUrl}/__knobs`, { method: 'DELETE' });
}

/**
 * Keeps payments in flight for as long as the test needs: every charge response waits at the provider (after the
 * charge has committed) until `releaseCharges()`. Pair with `chargesHeld(n)` to know the charge got there.
 */
export async function holdCharges() {
  await setProviderKnobs({ chargeHold: true });
}

/** Resolves once at least `count` charge responses are held at the provider (fails after 30 s). */
export async function chargesHeld(count = 1) {
  const response = await fetch(`${providerUrl}/__charges/held?atLeast=${count}&timeoutMs=30000`);
  expect(response.status, `${count} charge(s) held at the provider`).toBe(200);
}

/** Lets every held charge response go and turns the hold off. */
export async function releaseCharges() {
  const response = await fetch(`${providerUrl}/__charges/release`, { method: 'POST' });
  expect(response.ok).toBe(true);
}

export async function addToCart(page: Page, productName: string) {
  await page.getByRole('button', { name: `Add ${productName} to cart` }).click();
}

/** Cart with one product, checkout form filled in, ready to pay. */
export async function readyToPay(page: Page, productName = 'Dotted Notebook', email = 'shopper@example.com') {
  await page.goto('/');
  await addToCart(page, productName);
  await page.goto('/checkout');
  await page.getByLabel('Email for the receipt').fill(email);
  await page.getByLabel('Test card').selectOption('tok_visa');
}

export const payButton = (page: Page) => page.getByRole('button', { name: /^Pay / });

export async function expectConfirmation(page: Page): Promise<string> {
  await expect(page.getByRole('heading', { name: /your order is confirmed/ })).toBeVisible({
    timeout: 20_000,
  });
  const orderId = (await page.getByTestId('order-id').textContent())?.trim() ?? '';
  expect(orderId).toMatch(/^[0-9a-f-]{36}$/);
  return orderId;
}

/** The orders this browser's guest session owns, read from its order history in another tab. */
export async function ordersOfThisBrowser(context: BrowserContext): Promise<string[]> {
  const page = await context.newPage();
  try {
    await page.goto('/orders');
    await expect(page.getByRole('heading', { name: 'Your orders' })).toBeVisible();
    const links = await page.getByTestId('order-row').getByRole('link').all();
    const ids: string[] = [];
    for (const link of links) ids.push(((await link.getAttribute('href')) ?? '').replace('/orders/', ''));
    return ids;
  } finally {
    await page.close();
  }
}

/** Counts the placeOrder HTTP requests the page sends. */
export function countPlaceOrderRequests(page: Page): () => number {
  let count = 0;
  page.on('request', (request) => {
    if (request.url().includes('/api/trpc/checkout.placeOrder')) count += 1;
  });
  return () => count;
}

/** Sends the webhooks the provider held (`webhookHold`), in the given order. */
export async function flushProviderWebhooks(order: 'forward' | 'reverse' = 'forward') {
  const response = await fetch(`${providerUrl}/__webhooks/flush`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ order }),
  });
  expect(response.ok).toBe(true);
}
