/**
 * The admin dashboard in a real browser against the e2e stack: only an admin gets in (403 for a guest and for a
 * customer's token, 401 for a bad token), the charts fill in after an order, a key is found by its order id
 * and its trail followed to the provider, the webhook and the job, and a stuck key is evicted after a
 * confirmation — with the control that a completed key cannot be evicted without ticking the box.
 */
import { randomUUID } from 'node:crypto';
import { demoAdmin, demoUsers } from '@idem/dev-db/seed-data';
import { type Browser, expect, type Page, test } from '@playwright/test';
import { expectConfirmation, payButton, readyToPay, withStackDatabase } from './support.ts';

const [alice] = demoUsers;

/** A browser context signed in as the demo admin through /admin/login. */
async function adminPage(browser: Browser): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto('/admin/login');
  await page.getByLabel('Admin API token').fill(demoAdmin.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/admin$/);
  await expect(page.getByTestId('admin-email')).toHaveText(demoAdmin.email);
  return page;
}

/**
 * Places an order in a fresh guest browser; returns its id. With `shipped`, waits for the webhook and the worker
 * to ship it (the trail then has every step); without, the order's key is completed and that is all.
 */
async function placeOrderAsGuest(browser: Browser, { shipped = true } = {}): Promise<string> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await readyToPay(page, 'Dotted Notebook', 'trail@example.com');
  await payButton(page).click();
  const orderId = await expectConfirmation(page);
  if (shipped) await expect(page.getByTestId('order-status')).toHaveText('Shipped', { timeout: 30_000 });
  await context.close();
  return orderId;
}

test('a guest, a customer token and a bad token cannot open /admin (403, 403, 401)', async ({
  page,
  request,
}) => {
  const guest = await page.goto('/admin');
  expect(guest?.status()).toBe(403);
  await expect(page.getByRole('heading', { name: 'Admins only' })).toBeVisible();
  await expect(page.getByText('Retries, duplicates and keys')).toHaveCount(0);

  expect(
    (await request.get('/admin', { headers: { authorization: `Bearer ${alice.token}` } })).status(),
  ).toBe(403);
  expect((await request.get('/admin', { headers: { authorization: 'Bearer idem_nope' } })).status()).toBe(
    401,
  );
  // Control: the admin's own token opens it.
  expect(
    (await request.get('/admin', { headers: { authorization: `Bearer ${demoAdmin.token}` } })).status(),
  ).toBe(200);
  // The API behind the dashboard says the same.
  const api = await request.get('/api/trpc/admin.overview', {
    headers: { authorization: `Bearer ${alice.token}` },
  });
  expect(api.status()).toBe(403);

  // Signing in with a customer's token is refused, and the page stays forbidden.
  await page.goto('/admin/login');
  await page.getByLabel('Admin API token').fill(alice.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('main').getByRole('alert')).toHaveText(
    `That token belongs to ${alice.email}, who is not an admin.`,
  );
  expect((await page.goto('/admin'))?.status()).toBe(403);
});

test('the admin sees the order in the charts, finds its key by order id and follows its trail', async ({
  browser,
}) => {
  test.setTimeout(120_000);
  const orderId = await placeOrderAsGuest(browser);
  const page = await adminPage(browser);

  // Outcome counts reach the dashboard within a flush (5 s) and a refetch (5 s).
  const chart = page.getByTestId('outcome-chart').filter({ hasText: 'checkout.placeOrder' });
  await expect(chart.getByTestId('total-executed')).not.toHaveText(/executed\s*0$/, { timeout: 30_000 });
  await expect(chart.locator('.recharts-bar-rectangle').first()).toBeVisible();
  await expect(page.getByTestId('duplicates-chart').locator('svg.recharts-surface')).toBeVisible();

  await page.getByLabel('Search keys').fill(orderId);
  await page.getByRole('button', { name: 'Search' }).click();
  await expect(page).toHaveURL(new RegExp(`q=${orderId}`));
  const keys = page.getByRole('table', { name: 'Keys', exact: true });
  const row = keys.getByTestId('key-row').filter({ hasText: 'matched by order' });
  await expect(row).toHaveCount(1);
  await expect(row.getByTestId('key-status')).toHaveText('completed');
  await row.getByRole('link').click();

  await expect(page.getByRole('heading', { name: 'Key trail' })).toBeVisible();
  await expect(page.getByTestId('trail-order-id')).toHaveText(orderId);
  await expect(page.getByTestId('trail-step-2').getByTestId('key-status')).toHaveText('completed');
  await expect(page.getByTestId('trail-step-3')).toContainText('1 charge');
  await expect(page.getByTestId('trail-step-3')).toContainText(`order_${orderId}`);
  await expect(page.getByTestId('webhook-events')).toContainText('charge.succeeded');
  await expect(page.getByTestId('webhook-events')).toContainText('applied once');
  await expect(page.getByTestId('jobs')).toContainText('completed');
  await expect(page.getByTestId('trail-step-5')).toContainText('receipt → trail@example.com');
});

test('a stuck key is evicted after a confirmation and leaves an audit record; a completed one needs more', async ({
  browser,
}) => {
  test.setTimeout(120_000);
  // Its completed key is the control below; shipping it adds nothing here.
  const orderId = await placeOrderAsGuest(browser, { shipped: false });
  // What a server killed mid-request leaves behind: processing, lease ended two minutes ago.
  const stuckKey = `stuck-${randomUUID()}`;
  const stuckScope = `guest:${randomUUID()}`;
  await withStackDatabase(orderId, (database) =>
    database.query(
      `insert into idempotency_keys (scope, procedure, key, fingerprint, state, lease_owner, locked_until,
         created_at, expires_at)
       values ($1, 'checkout.placeOrder', $2, repeat('0', 64), 'processing', gen_random_uuid(),
         now() - interval '2 minutes', now() - interval '3 minutes', now() + interval '1 day')`,
      [stuckScope, stuckKey],
    ),
  );

  const page = await adminPage(browser);
  const stuckTable = page.getByRole('table', { name: 'Stuck keys' });
  const stuckRow = stuckTable.locator(`[data-key="${stuckKey}"]`);
  await expect(stuckRow.getByTestId('key-status')).toHaveText('stuck');
  await expect(page.getByTestId('eviction-rule')).toContainText('When is evicting a key safe?');

  // Cancel first: nothing happens.
  await stuckRow.getByRole('button', { name: 'Evict…' }).click();
  const dialog = stuckRow.getByRole('alertdialog', { name: 'Evict this key?' });
  await expect(dialog).toContainText('It is stuck');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(stuckRow).toHaveCount(1);

  await stuckRow.getByRole('button', { name: 'Evict…' }).click();
  await stuckRow.getByRole('alertdialog').getByRole('button', { name: 'Evict key' }).click();
  await expect(stuckRow).toHaveCount(0);

  // Its trail: the row is gone, the audit record says who and why.
  await page.getByLabel('Search keys').fill(stuckKey);
  await page.getByRole('button', { name: 'Search' }).click();
  await expect(page.getByTestId('no-keys')).toBeVisible();
  const ref = Buffer.from(JSON.stringify([stuckScope, 'checkout.placeOrder', stuckKey])).toString(
    'base64url',
  );
  await page.goto(`/admin/keys/${ref}`);
  await expect(page.getByTestId('trail-step-2')).toContainText('There is no row for this key now');
  await expect(page.getByTestId('audit-event')).toContainText(
    `evicted by ${demoAdmin.email} (lease had expired)`,
  );

  // Control: the order's completed key cannot be evicted until the admin ticks the explicit confirmation.
  await page.goto(`/admin?q=${orderId}`);
  const completedRow = page.getByRole('table', { name: 'Keys', exact: true }).getByTestId('key-row');
  await expect(completedRow).toHaveCount(1);
  await completedRow.getByRole('button', { name: 'Evict…' }).click();
  const confirm = completedRow.getByRole('alertdialog');
  await expect(confirm).toContainText('This key is NOT stuck: it is completed.');
  await expect(confirm.getByRole('button', { name: 'Evict key' })).toBeDisabled();
  await confirm.getByRole('checkbox').check();
  await expect(confirm.getByRole('button', { name: 'Evict key' })).toBeEnabled();
  await confirm.getByRole('button', { name: 'Cancel' }).click();
  await expect(completedRow.getByTestId('key-status')).toHaveText('completed');
});
