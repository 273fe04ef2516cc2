/**
 * Issue 29 (confirmed): the paying tab's sign of life must never write its intent back over a newer one. A tab
 * waiting for its payment's outcome refreshes a mark every 2 s so that the other tabs show the payment in flight.
 * Frozen in the background for longer than 8 s, it is taken for gone: another tab shows the payment in doubt and
 * may start a new purchase (a new key). When the frozen tab resumes, its overdue refresh runs — and a tab's
 * localStorage is its own copy, which takes the other tabs' writes only when their messages arrive: the refresh
 * can run on a copy that still holds the first intent. A refresh that rewrote the intent record (key, payload
 * and mark) from that copy wrote the first intent back over the new purchase.
 *
 * Two things are done from the test side (`tabControls`, in tab 1 only), because the browser does not let a test
 * decide them. The freeze: in headless Chromium, CDP's `Page.setWebLifecycleState` leaves timers firing, so
 * tab 1's timers are held instead, and each one that came due fires once when it thaws, as in a frozen page;
 * tab 2 meanwhile sees tab 1's sign of life age in real time. The arrival of tab 2's writes at tab 1, before or
 * after its overdue refresh: from the moment it freezes, tab 1's reads of the `idem:` names (the intent and its
 * marks) return what it had then, plus its own writes — the copy a tab holds until the other tabs' messages
 * arrive.
 *
 * CONTROL (injected from the test side): tab 1 also rewrites the whole record each time it refreshes its mark, as
 * a refresh inside the record did — the first intent is written back over the new purchase.
 */
import { type BrowserContext, expect, type Page, test } from '@playwright/test';
import {
  CHECKOUT_INTENT_PREFIX,
  CHECKOUT_MARK_PREFIX,
  chargesForOrder,
  checkoutIntentName,
  expectConfirmation,
  holdPaymentInBrowser,
  ordersOfThisBrowser,
  payButton,
  readyToPay,
  resetProviderKnobs,
} from '../e2e/support.ts';

test.afterEach(async () => {
  await resetProviderKnobs();
});

/** What `tabControls` puts on tab 1's window. */
interface TabControls {
  /** Timers stop firing; each one that comes due meanwhile fires once on `thaw()`, as in a frozen page. */
  freeze(): void;
  /** Fires the timers that came due while frozen; returns the `idem:` writes they made: [name, value|null]. */
  thaw(): Array<[string, string | null]>;
  /** From now on, reads of `idem:` names return this tab's copy as it is now, with its own later writes. */
  holdBack(): void;
  /** Reads go to localStorage again. */
  release(): void;
}
type ControlledWindow = Window & { __tab?: TabControls };

/**
 * Tab 1's controls (an init script). The `idem:` names are the intent and its tabs' marks; while held back, the
 * other tabs' writes to them have not reached this tab.
 */
function tabControls() {
  let frozen = false;
  const due = new Map<number, () => void>();
  let copy: Map<string, string | null> | undefined;
  let writes: Array<[string, string | null]> = [];

  const { setInterval: startInterval, setTimeout: startTimeout, clearInterval, clearTimeout } = window;
  type Callback = (...args: unknown[]) => void;
  const freezable =
    (start: typeof startInterval) =>
    (handler: TimerHandler, timeout?: number, ...args: unknown[]) => {
      const run = () => (handler as Callback)(...args);
      const id = start(() => (frozen ? due.set(id, run) : run()), timeout);
      return id;
    };
  window.setInterval = freezable(startInterval) as typeof window.setInterval;
  window.setTimeout = freezable(startTimeout) as typeof window.setTimeout;
  const forgetting = (clear: typeof clearInterval) => (id?: number) => {
    if (id !== undefined) due.delete(id);
    clear(id);
  };
  window.clearInterval = forgetting(clearInterval) as typeof window.clearInterval;
  window.clearTimeout = forgetting(clearTimeout) as typeof window.clearTimeout;

  const { getItem, setItem, removeItem } = Storage.prototype;
  const held = (name: string) => copy !== undefined && name.startsWith('idem:');
  Storage.prototype.getItem = function (this: Storage, name: string) {
    return held(name) ? (copy?.get(name) ?? null) : getItem.call(this, name);
  };
  Storage.prototype.setItem = function (this: Storage, name: string, value: string) {
    if (held(name)) copy?.set(name, String(value));
    if (name.startsWith('idem:')) writes.push([name, String(value)]);
    setItem.call(this, name, value);
  };
  Storage.prototype.removeItem = function (this: Storage, name: string) {
    if (held(name)) copy?.set(name, null);
    if (name.startsWith('idem:')) writes.push([name, null]);
    removeItem.call(this, name);
  };

  const controls: TabControls = {
    freeze() {
      frozen = true;
    },
    thaw() {
      frozen = false;
      writes = [];
      const callbacks = [...due.values()];
      due.clear();
      for (const callback of callbacks) callback();
      return writes;
    },
    holdBack() {
      const names = Object.keys(localStorage).filter((name) => name.startsWith('idem:'));
      copy = new Map(names.map((name) => [name, localStorage[name] ?? null]));
    },
    release() {
      copy = undefined;
    },
  };
  (window as ControlledWindow).__tab = controls;
}

/**
 * The CONTROL's tab 1: each write of a mark also writes back the record as this tab reads it, with the mark
 * inside — the refresh as a rewrite of the whole record.
 */
function rewriteRecordOnRefresh({ intentPrefix, markPrefix }: { intentPrefix: string; markPrefix: string }) {
  const setItem = Storage.prototype.setItem;
  Storage.prototype.setItem = function (this: Storage, name: string, value: string) {
    setItem.call(this, name, value);
    if (!name.startsWith(markPrefix)) return;
    const intentName = Object.keys(localStorage).find((key) => key.startsWith(intentPrefix));
    const record = JSON.parse(this.getItem(intentName ?? '') ?? 'null');
    if (intentName && record?.sent) {
      record.sent.alive = Number(value);
      setItem.call(this, intentName, JSON.stringify(record));
    }
  };
}

const readRecord = (page: Page, name: string) =>
  page.evaluate((intentName) => JSON.parse(localStorage.getItem(intentName) ?? 'null'), name);

/**
 * Tab 1 pays (its request held at the browser) and is frozen; tab 2, once tab 1 is taken for gone, starts a new
 * purchase and pays (held at the browser too). Then tab 1 thaws with tab 2's writes held back, and its overdue
 * refresh runs. Returns once tab 2 has every write that refresh made.
 */
async function refreshAfterANewPurchase(page: Page, context: BrowserContext) {
  await page.addInitScript(tabControls);
  await readyToPay(page);
  const firstPayment = await holdPaymentInBrowser(page);
  await payButton(page).click();
  await firstPayment.waiting;
  await expect(page.getByTestId('payment-status')).toHaveText('sending');
  const intentName = await checkoutIntentName(page);
  const firstKey: string = (await readRecord(page, intentName)).key;

  const second = await context.newPage();
  await second.goto('/checkout');
  await expect(second.getByTestId('payment-in-other-tab')).toBeVisible();

  // Tab 1 is frozen in the background; what it has read by then is what it reads when it thaws.
  await page.evaluate(() => {
    const tab = (window as ControlledWindow).__tab;
    if (!tab) throw new Error('tabControls is not installed');
    tab.holdBack();
    tab.freeze();
  });

  // No sign of life from tab 1 for 8 s: tab 2 shows its payment in doubt, and the shopper starts a new one.
  await expect(second.getByTestId('payment-in-doubt')).toBeVisible();
  await second.getByRole('button', { name: 'Start a new purchase' }).click();
  await second.getByLabel('Email for the receipt').fill('second.try@example.com');
  const secondPayment = await holdPaymentInBrowser(second);
  await payButton(second).click();
  await secondPayment.waiting;
  await expect(second.getByTestId('payment-status')).toHaveText('sending');
  const newPurchase = await readRecord(second, intentName);
  expect(newPurchase.key).not.toBe(firstKey);
  expect(JSON.parse(newPurchase.sent.payload).json.email).toBe('second.try@example.com');

  // Tab 1 thaws: its refresh is overdue and runs at once, on its copy, which still holds the first intent.
  const writes = await page.evaluate(() => (window as ControlledWindow).__tab?.thaw() ?? []);
  expect(writes.length).toBeGreaterThan(0);
  // A tab's writes reach another tab in the order it made them: once tab 2 has this one, it has the refresh's.
  const barrier = `e2e:barrier:${Date.now()}`;
  await page.evaluate((name) => localStorage.setItem(name, 'sent'), barrier);
  await second.waitForFunction((name) => localStorage.getItem(name) === 'sent', barrier);

  return { second, intentName, firstKey, newPurchase, writes, firstPayment, secondPayment };
}

test('CONTROL (the refresh rewrites the whole record): the first intent is written back over the new purchase', async ({
  page,
  context,
}) => {
  await page.addInitScript(rewriteRecordOnRefresh, {
    intentPrefix: CHECKOUT_INTENT_PREFIX,
    markPrefix: CHECKOUT_MARK_PREFIX,
  });
  const { second, intentName, firstKey } = await refreshAfterANewPurchase(page, context);
  const record = await readRecord(second, intentName);
  expect(record.key).toBe(firstKey);
  expect(JSON.parse(record.sent.payload).json.email).toBe('shopper@example.com');
});

test("PROTECTED: the resumed tab's refresh leaves the new purchase in place; each purchase charged once", async ({
  page,
  context,
}) => {
  const { second, intentName, newPurchase, writes, firstPayment, secondPayment } =
    await refreshAfterANewPurchase(page, context);
  expect(await readRecord(second, intentName)).toEqual(newPurchase);
  // The refresh wrote its own mark, never the intent record.
  expect(writes.map(([name]) => name)).not.toContain(intentName);
  await expect(second.getByTestId('payment-status')).toHaveText('sending');

  // Both payments go through, each under its own key.
  await page.evaluate(() => (window as ControlledWindow).__tab?.release());
  secondPayment.send();
  const secondOrder = await expectConfirmation(second);
  firstPayment.send();
  const firstOrder = await expectConfirmation(page);
  expect(firstOrder).not.toBe(secondOrder);
  expect((await ordersOfThisBrowser(context)).toSorted()).toEqual([firstOrder, secondOrder].toSorted());
  for (const orderId of [firstOrder, secondOrder])
    expect(await chargesForOrder(orderId)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
  // Neither tab leaves a mark behind.
  await expect
    .poll(() =>
      second.evaluate(
        (prefix) => Object.keys(localStorage).filter((name) => name.startsWith(prefix)),
        CHECKOUT_MARK_PREFIX,
      ),
    )
    .toEqual([]);
});
