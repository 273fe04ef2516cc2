/**
 * Every state of a payment is said to a screen reader and shown to a sighted customer: progress in the polite
 * live region under the Pay button (role "status", visible text), what needs the customer in the alert region
 * (role "alert") with its panel on screen; axe finds no serious violation in any state. Each state is driven
 * for real — the provider's knobs, a request dropped or held by the test, a reload, a second tab — and each
 * run ends with one order at most. A state that lasts while a payment is in flight is held there by a gate the
 * test opens once it has checked the state (a request held at the browser, a charge held at the provider),
 * never by a latency that must outlast the checks. With SCREENSHOTS=1, one screenshot per state goes to
 * docs/screenshot-payment-<state>.png.
 */
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import { type BrowserContext, expect, type Locator, type Page, type Route, test } from '@playwright/test';
import {
  chargesForOrder,
  chargesHeld,
  checkoutIntentName,
  expectConfirmation,
  holdCharges,
  holdPaymentInBrowser,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
  releaseCharges,
  reloadMidPayment,
  resetProviderKnobs,
  settledOrderOfThisBrowser,
} from './support.ts';

const PLACE_ORDER = '**/api/trpc/checkout.placeOrder';

test.afterEach(async () => {
  await resetProviderKnobs();
});

const progress = (page: Page) => page.getByTestId('payment-progress');
const attention = (page: Page) => page.getByTestId('payment-attention');
/** The progress line people see under the Pay button (the live region itself is for screen readers). */
const progressShown = (page: Page) => page.getByTestId('payment-progress-shown');

/** `locator` is on screen at a readable size: not the 1-pixel box of text only for screen readers. */
async function expectShown(locator: Locator) {
  await expect(locator).toBeVisible();
  expect((await locator.boundingBox())?.height ?? 0).toBeGreaterThanOrEqual(12);
}

/**
 * The line under the Pay button shows what the polite region says. Both are read in one go: the attempt number
 * in them moves on while a retry waits, so a text read first and compared later can be a step behind.
 */
async function expectProgressShown(page: Page) {
  await expect
    .poll(() =>
      page.evaluate(() => {
        const text = (id: string) => document.querySelector(`[data-testid="${id}"]`)?.textContent ?? '';
        const [said, shown] = [text('payment-progress'), text('payment-progress-shown')];
        return said !== '' && said === shown ? 'the same words' : `region: "${said}", line: "${shown}"`;
      }),
    )
    .toBe('the same words');
  await expectShown(progressShown(page));
}

/** The polite region says `text`; the alert region says nothing. */
async function expectProgress(page: Page, state: string, text: RegExp) {
  await expect(progress(page)).toHaveRole('status');
  await expect(progress(page)).toHaveText(text, { timeout: 20_000 });
  await expect(progress(page)).toHaveAttribute('data-state', state);
  await expect(attention(page)).toHaveText('');
}

/** The alert region says `text`; the polite region says nothing. */
async function expectAttention(page: Page, state: string, text: RegExp) {
  await expect(attention(page)).toHaveRole('alert');
  await expect(attention(page)).toHaveText(text, { timeout: 20_000 });
  await expect(progress(page)).toHaveAttribute('data-state', state);
  await expect(progress(page)).toHaveText('');
}

/** No serious or critical axe violation (WCAG 2.x A/AA) in the page as the state shows it. */
async function expectAccessible(page: Page, state: string) {
  const { violations } = await new AxeBuilder({ page })
    .withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'])
    .analyze();
  const serious = violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map(
      (violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`,
    );
  expect(serious, state).toEqual([]);
}

/** Writes docs/screenshot-payment-<state>.png, only when SCREENSHOTS=1 (so `pnpm test` leaves docs alone). */
async function screenshot(page: Page, state: string) {
  if (process.env.SCREENSHOTS !== '1') return;
  await page.screenshot({
    path: fileURLToPath(new URL(`../../docs/screenshot-payment-${state}.png`, import.meta.url)),
  });
}

/** A gate the test opens: requests routed through `hold` wait at the browser until `open()`. */
function gate() {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, hold: async (route: Route) => opened.then(() => route.continue()) };
}

/** Keeps the checkout on screen after a successful payment: the navigation to the order waits for `open()`. */
async function holdOrderPage(page: Page) {
  const orderPage = gate();
  await page.route((url) => url.pathname.startsWith('/orders/'), orderPage.hold);
  return orderPage;
}

async function expectOneOrderOneCharge(context: BrowserContext, orderId: string) {
  expect(await ordersOfThisBrowser(context)).toEqual([orderId]);
  expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
}

test('sending: "Sending your payment…", politely, on screen and on the button', async ({ page, context }) => {
  await readyToPay(page);
  // The request waits at the browser while the state is read.
  const payment = await holdPaymentInBrowser(page);
  await payButton(page).click();
  await payment.waiting;
  await expectProgress(page, 'sending', /^Sending your payment…$/);
  await expectProgressShown(page);
  await expect(page.locator('form button[type="submit"]')).toHaveText('Processing payment…');
  await expectAccessible(page, 'sending');
  await screenshot(page, 'sending');
  payment.send();
  await expectOneOrderOneCharge(context, await expectConfirmation(page));
});

test('retrying: a connection problem is said, with the attempt, and that the charge is once', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  const retry = gate();
  let attempts = 0;
  await page.route(PLACE_ORDER, async (route) => {
    attempts += 1;
    // The first attempt never reaches the server; the retry waits at the browser while the state is read.
    if (attempts === 1) return route.abort('connectionreset');
    return retry.hold(route);
  });
  await payButton(page).click();
  await expectProgress(
    page,
    'retrying',
    /^Connection problem — retrying your payment \(attempt 2 of \d+\)\. You will be charged once\.$/,
  );
  await expectProgressShown(page);
  await expect(page.locator('form button[type="submit"]')).toHaveText(/^Connection problem — retrying/);
  await expectAccessible(page, 'retrying');
  await screenshot(page, 'retrying');
  retry.open();
  await expectOneOrderOneCharge(context, await expectConfirmation(page));
});

test('conflict: a retry that finds the same payment still running says it waits for it, not "connection problem"', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  // The first attempt's charge waits at the provider: that payment is running at the server until released.
  await holdCharges();
  const laterAttempts = gate();
  let attempts = 0;
  await page.route(PLACE_ORDER, async (route) => {
    attempts += 1;
    if (attempts === 1) {
      // The first attempt reaches the server and runs there; once its charge is at the provider, the browser
      // loses the connection.
      void route.fetch().catch(() => undefined);
      await chargesHeld(1);
      return route.abort('connectionreset');
    }
    // The retry finds that payment running (409); the attempts after it wait at the browser while the state
    // is read.
    if (attempts === 2) return route.continue();
    return laterAttempts.hold(route);
  });
  await payButton(page).click();
  await expectProgress(
    page,
    'conflict',
    /^Your payment is still being processed — waiting for its result \(attempt \d+ of \d+\)\. You will be charged once\.$/,
  );
  await expect(progress(page)).not.toHaveText(/Connection problem/);
  await expectProgressShown(page);
  await expect(page.locator('form button[type="submit"]')).toHaveText(/^Still processing — waiting/);
  await expectAccessible(page, 'conflict');
  await screenshot(page, 'conflict');
  await releaseCharges();
  laterAttempts.open();
  await expectOneOrderOneCharge(context, await expectConfirmation(page));
});

test('replayed: an answer lost after the commit is replayed, and the customer hears they paid once', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  let lost = 0;
  await page.route(PLACE_ORDER, async (route) => {
    if (lost > 0) return route.continue();
    lost += 1;
    await route.fetch(); // the server runs it and commits…
    await route.abort('connectionreset'); // …and the browser never hears back
  });
  const orderPage = await holdOrderPage(page);
  await payButton(page).click();
  await expectProgress(
    page,
    'replayed',
    /^This payment had already gone through: you were charged once\. Opening your order…$/,
  );
  await expectProgressShown(page);
  await expect(page.locator('form button[type="submit"]')).toHaveText('Already paid — opening your order…');
  // The summary still says what was paid for (the cart itself is emptied on success).
  await expect(page.getByRole('complementary')).toContainText('1 × Dotted Notebook');
  await expectAccessible(page, 'replayed');
  await screenshot(page, 'replayed');
  orderPage.open();
  await expectOneOrderOneCharge(context, await expectConfirmation(page));
});

test('in doubt: after a reload mid-payment, an alert says the payment is unconfirmed and checking is safe', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await reloadMidPayment(page);
  await expectAttention(
    page,
    'in-doubt',
    /^We could not confirm your last payment\. Checking its status is safe: you will never be charged twice for it\.$/,
  );
  await expectShown(page.getByTestId('payment-in-doubt'));
  await expect(page.getByTestId('payment-in-doubt')).toContainText('We could not confirm your last payment.');
  await expectAccessible(page, 'in-doubt');
  await screenshot(page, 'in-doubt');
  await page.getByRole('button', { name: 'Check payment status' }).click();
  await expectOneOrderOneCharge(context, await expectConfirmation(page));
});

test('unresolved: a 422 to the re-sent payment is an alert that it is still being checked', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await reloadMidPayment(page);
  await settledOrderOfThisBrowser(context);
  // The stored copy no longer matches what was sent under the key: the re-send is answered 422.
  const intentName = await checkoutIntentName(page);
  await page.evaluate((name) => {
    const record = JSON.parse(localStorage.getItem(name) ?? 'null');
    const sent = JSON.parse(record.sent.payload);
    sent.json.email = 'someone-else@example.com';
    localStorage.setItem(
      name,
      JSON.stringify({ ...record, sent: { ...record.sent, payload: JSON.stringify(sent) } }),
    );
  }, intentName);
  await page.reload();
  await page.getByRole('button', { name: 'Check payment status' }).click();
  await expectAttention(
    page,
    'unresolved',
    /^This payment is still being checked\. You will not be charged again/,
  );
  await expectShown(page.getByTestId('payment-still-checking'));
  await expect(page.getByTestId('payment-still-checking')).toContainText(
    'This payment is still being checked.',
  );
  await expect(page.getByTestId('unresolved-intent-order')).toBeVisible();
  await expectAccessible(page, 'unresolved');
  await screenshot(page, 'unresolved');
  expect(await ordersOfThisBrowser(context)).toHaveLength(1);
});

test('expired: an intent too old to re-send is an alert that names what became of it', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  await reloadMidPayment(page);
  await settledOrderOfThisBrowser(context);
  const intentName = await checkoutIntentName(page);
  await page.evaluate((name) => {
    const record = JSON.parse(localStorage.getItem(name) ?? 'null');
    localStorage.setItem(name, JSON.stringify({ ...record, createdAt: Date.now() - 49 * 3_600_000 }));
  }, intentName);
  await page.reload();
  await expectAttention(
    page,
    'expired',
    /^Your last payment attempt is too old to retry\. It placed an order: you can view it\.$/,
  );
  await expectShown(page.getByTestId('payment-expired'));
  await expect(page.getByTestId('payment-expired')).toContainText('too old to retry');
  await expect(page.getByTestId('expired-intent-order')).toBeVisible();
  await expectAccessible(page, 'expired');
  await screenshot(page, 'expired');
  expect(await ordersOfThisBrowser(context)).toHaveLength(1);
});

test('in another tab: a tab opened mid-payment says, politely, that the other tab is paying', async ({
  page,
  context,
}) => {
  await readyToPay(page);
  // The first tab's request waits at the browser while the second tab loads and is read.
  const payment = await holdPaymentInBrowser(page);
  await payButton(page).click();
  await payment.waiting;
  await expect(progress(page)).toHaveAttribute('data-state', 'sending');
  const second = await context.newPage();
  // Records the live region's text when it first appears: a region inserted with its text is often not read.
  await second.addInitScript(() => {
    const seen = window as unknown as { firstProgressText?: string };
    new MutationObserver((_, observer) => {
      const region = document.querySelector('[data-testid="payment-progress"]');
      if (!region) return;
      seen.firstProgressText = region.textContent ?? '';
      observer.disconnect();
    }).observe(document, { childList: true, subtree: true });
  });
  await second.goto('/checkout');
  await expectProgress(
    second,
    'in-other-tab',
    /^This cart is being paid for in another tab\. This page follows it\. You will be charged once\.$/,
  );
  expect(await second.evaluate(() => (window as { firstProgressText?: string }).firstProgressText)).toBe('');
  await expect(progressShown(second)).toHaveText(''); // the panel shows it
  await expectShown(second.getByTestId('payment-in-other-tab'));
  await expect(second.getByTestId('payment-in-other-tab')).toContainText('being paid for in another tab');
  await expectAccessible(second, 'in-other-tab');
  await screenshot(second, 'in-other-tab');
  payment.send();
  const orderId = await expectConfirmation(page);
  // The first tab's outcome reaches this one: nothing is in progress any more, and its cart is empty.
  await expect(second.getByTestId('payment-in-other-tab')).toHaveCount(0);
  await expect(second.getByText('Your cart is empty.')).toBeVisible();
  await expectOneOrderOneCharge(context, orderId);
});
