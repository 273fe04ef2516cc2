/**
 * The client half under what real users and networks do. Each test asserts ONE order and ONE provider charge
 * for the intent, plus what the user sees. The protection must not depend on the disabled Pay button, so
 * several tests bypass it.
 */
import { expect, type Page, test } from '@playwright/test';
import {
  chargesForOrder,
  countPlaceOrderRequests,
  expectConfirmation,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
  reloadMidPayment,
  resetProviderKnobs,
  setProviderKnobs,
} from './support.ts';

test.afterEach(async () => {
  await resetProviderKnobs();
});

async function expectOneOrderOneCharge(orders: string[], orderId: string) {
  expect(orders).toEqual([orderId]);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
}

/**
 * Clicks Pay `times` times in one synchronous burst, re-enabling the button before each click; once the page
 * shows it (a page that has just loaded may not have rendered its form yet).
 */
async function burstClickPay(page: Page, times: number) {
  await expect(payButton(page)).toBeEnabled();
  await page.evaluate((count) => {
    const button = document.querySelector<HTMLButtonElement>('form button[type="submit"]');
    if (!button) throw new Error('no Pay button');
    for (let index = 0; index < count; index += 1) {
      button.disabled = false;
      button.removeAttribute('disabled');
      button.click();
    }
  }, times);
}

/**
 * Clicks Pay in both tabs before either can hear of the other's attempt. A tab hears of another's through storage
 * events, which reach it in the order of the writes; so `second` is armed to click on a storage write that
 * `first` makes just before its own click, and handles it before anything that click writes. (Two separate
 * clicks, even two `evaluate`s at once, leave a window in which the first tab pays and the second shows the
 * confirmation instead of its form: CI run 22 lost that race.)
 */
async function clickPayInBothTabsAtOnce(first: Page, second: Page) {
  await Promise.all([expect(payButton(first)).toBeEnabled(), expect(payButton(second)).toBeEnabled()]);
  const trigger = `e2e-pay-now-${crypto.randomUUID()}`;
  await second.evaluate((key) => {
    const onStorage = (event: StorageEvent) => {
      if (event.key !== key) return;
      window.removeEventListener('storage', onStorage);
      const button = document.querySelector<HTMLButtonElement>('form button[type="submit"]');
      document.documentElement.dataset.e2ePay =
        button && !button.disabled ? 'clicked' : 'no enabled Pay button';
      button?.click();
    };
    window.addEventListener('storage', onStorage);
  }, trigger);
  await first.evaluate((key) => {
    const button = document.querySelector<HTMLButtonElement>('form button[type="submit"]');
    if (!button) throw new Error('no Pay button');
    localStorage.setItem(key, 'now');
    button.click();
  }, trigger);
  await expect(second.locator('html')).toHaveAttribute('data-e2e-pay', 'clicked');
}

/**
 * Resolves once every request `page` has started so far has been seen here: it starts one more (a probe, in a
 * task of its own after everything already queued) and waits for it. The page's requests are seen in the order
 * it starts them, so a check that nothing was sent, made after this, cannot run before a request the page had
 * already started — no fixed wait stands for "nothing happened".
 */
async function requestsStartedSoFarSeen(page: Page) {
  const probe = `/api/health?probe=${crypto.randomUUID()}`;
  const seen = page.waitForEvent('request', (request) => request.url().endsWith(probe));
  await page.evaluate((url) => {
    setTimeout(() => void fetch(url).catch(() => undefined), 0);
  }, probe);
  await seen;
}

test('double click on Pay: one request, one order, one charge', async ({ page, context }) => {
  await readyToPay(page);
  const requests = countPlaceOrderRequests(page);
  await payButton(page).dblclick();
  const orderId = await expectConfirmation(page);
  expect(requests()).toBe(1);
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), orderId);
});

test('triple click with the disabled state bypassed: the in-flight promise is shared', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  const requests = countPlaceOrderRequests(page);
  await burstClickPay(page, 3);
  const orderId = await expectConfirmation(page);
  expect(requests()).toBe(1);
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), orderId);
});

test('control: a naive client that sends each of three clicks with a fresh key buys several times', async ({
  page,
  context,
}) => {
  // The naive client, played from the test side: the form's one request goes out three times, each with a
  // fresh Idempotency-Key (what a client does that mints a key per request); the page gets the first answer.
  await page.route('**/api/trpc/checkout.placeOrder**', async (route) => {
    const headers = await route.request().allHeaders();
    const answers = await Promise.all(
      [1, 2, 3].map(() => route.fetch({ headers: { ...headers, 'idempotency-key': crypto.randomUUID() } })),
    );
    const [first] = answers;
    if (!first) throw new Error('no answer');
    await route.fulfill({ response: first });
  });
  await readyToPay(page);
  await burstClickPay(page, 3);
  await expectConfirmation(page);
  const orders = await ordersOfThisBrowser(context);
  console.log(`[control] three clicks sent with a key per request → ${orders.length} orders`);
  expect(orders.length).toBeGreaterThan(1);
});

test('the response is lost after the server committed: the retry replays it, same key', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  let lost = 0;
  await page.route('**/api/trpc/checkout.placeOrder', async (route) => {
    if (lost > 0) return route.continue();
    lost += 1;
    await route.fetch(); // the server runs it and commits…
    await route.abort('connectionreset'); // …and the browser never hears back
  });
  const requests = countPlaceOrderRequests(page);
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  expect(lost).toBe(1);
  expect(requests()).toBeGreaterThanOrEqual(2);
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), orderId);
});

test('the provider charges but its answer is lost: the app releases the key, the retry charges no second time', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await setProviderKnobs({ dropResponseNext: 1 });
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), orderId);
});

test('offline during submit: the payment waits for the connection, then is sent once', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  const requests = countPlaceOrderRequests(page);
  let answered = 0;
  page.on('response', (response) => {
    if (response.url().includes('/api/trpc/checkout.placeOrder')) answered += 1;
  });
  await context.setOffline(true);
  await payButton(page).click();
  await expect(page.locator('form button[type="submit"]')).toBeDisabled();
  await requestsStartedSoFarSeen(page);
  expect(requests()).toBe(0); // held, not failed: nothing left the browser
  await context.setOffline(false);
  const orderId = await expectConfirmation(page);
  // Sent once: one attempt reached the server. Chromium may tell the page it is online a moment before its
  // emulated network is up; an attempt sent in that moment fails in the browser (never reaching the server)
  // and the retry link re-sends it with the same key, so attempts are not counted here, answers are.
  expect(answered).toBe(1);
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), orderId);
});

test('reload while the payment is in flight, then check it: one order (the key survived the reload)', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await reloadMidPayment(page);
  await expect(page.getByTestId('payment-in-doubt')).toBeVisible();
  await page.getByRole('button', { name: 'Check payment status' }).click();
  const orderId = await expectConfirmation(page);
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), orderId);
});

test('back after success: the checkout says the order is placed and links to it; no new order', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  await page.goBack();
  await expect(page.getByTestId('already-placed')).toBeVisible();
  await expect(payButton(page)).toHaveCount(0);
  await page.getByRole('link', { name: 'View your order' }).click();
  expect(await expectConfirmation(page)).toBe(orderId);
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), orderId);
});

test('two tabs paying the same cart at once: one order, both tabs show it', async ({ page, context }) => {
  await readyToPay(page);
  const second = await context.newPage();
  await second.goto('/checkout');
  await second.getByLabel('Email for the receipt').fill('shopper@example.com');
  await second.getByLabel('Test card').selectOption('tok_visa');

  const sentByFirst = countPlaceOrderRequests(page);
  const sentBySecond = countPlaceOrderRequests(second);
  await clickPayInBothTabsAtOnce(page, second);
  const [first, other] = await Promise.all([expectConfirmation(page), expectConfirmation(second)]);
  expect(other).toBe(first);
  // Both tabs did send: the one order is the server's doing, not one tab staying quiet.
  expect(sentByFirst()).toBeGreaterThanOrEqual(1);
  expect(sentBySecond()).toBeGreaterThanOrEqual(1);
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), first);
});

test('editing the form after an unknown outcome re-checks the ORIGINAL payment instead of paying again', async ({
  page,
  context,
}) => {
  await readyToPay(page, 'Dotted Notebook', 'original@example.com');
  // Every answer to placeOrder is lost, though the server runs and commits the first.
  await page.route('**/api/trpc/checkout.placeOrder', async (route) => {
    await route.fetch();
    await route.abort('connectionreset');
  });
  await payButton(page).click();
  // In doubt once the link's retries run out: its waits add up to 22.5 s at the most.
  await expect(page.getByTestId('payment-in-doubt')).toBeVisible({ timeout: 40_000 });
  await page.unroute('**/api/trpc/checkout.placeOrder');

  await page.getByLabel('Email for the receipt').fill('edited@example.com');
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  await expect(page.getByText('original@example.com', { exact: true })).toBeVisible();
  await expectOneOrderOneCharge(await ordersOfThisBrowser(context), orderId);
});
