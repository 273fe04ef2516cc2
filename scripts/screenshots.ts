/**
 * Regenerates the README's screenshots from a running stack: `pnpm start`, then
 *   node --import tsx scripts/screenshots.ts [http://localhost:3000] [--admin-only]
 *
 * The admin pages need a little traffic first: a few API orders (one retried, one raced by five requests with
 * the same key) so the charts have replays and 409s. With DATABASE_URL set (the stack's database), a stuck key is
 * also planted — a processing row whose lease has ended, as a crashed server leaves it — for the stuck-keys list.
 */
import { randomUUID } from 'node:crypto';
import { demoAdmin, demoUsers } from '@idem/dev-db/seed-data';
import { chromium } from '@playwright/test';
import pg from 'pg';

const args = process.argv.slice(2);
const baseUrl = args.find((arg) => !arg.startsWith('--')) ?? 'http://localhost:3000';
const adminOnly = args.includes('--admin-only');
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium' });
const page = await browser.newPage({ viewport: { width: 1280, height: 860 }, deviceScaleFactor: 1 });

if (!adminOnly) {
  await page.goto(baseUrl);
  await page.screenshot({ path: 'docs/screenshot-catalog.png' });

  await page.getByRole('button', { name: 'Add Stoneware Mug to cart' }).click();
  await page.getByRole('button', { name: 'Add Stoneware Mug to cart' }).click();
  await page.getByRole('button', { name: 'Add Desk Lamp to cart' }).click();
  await page.goto(`${baseUrl}/checkout`);
  await page.getByLabel('Email for the receipt').fill('shopper@example.com');
  await page.screenshot({ path: 'docs/screenshot-checkout.png' });

  await page.getByRole('button', { name: /^Pay / }).click();
  await page.getByRole('heading', { name: /confirmed/ }).waitFor();
  // The provider's webhook and the worker ship it a moment later.
  await page.getByTestId('order-status').filter({ hasText: 'Shipped' }).waitFor({ timeout: 60_000 });
  await page.screenshot({ path: 'docs/screenshot-confirmation.png' });
}

// Traffic for the charts: plain orders, a retried one (a replay) and a race on one key (409s and replays).
const alice = demoUsers[0];
function apiOrder(key: string) {
  return fetch(`${baseUrl}/api/trpc/checkout.placeOrder`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${alice.token}`,
      'idempotency-key': key,
    },
    body: JSON.stringify({
      json: { items: [{ sku: 'NB-DOT-A5', quantity: 1 }], email: alice.email, cardToken: 'tok_visa' },
    }),
  });
}
for (let i = 0; i < 3; i += 1) await apiOrder(randomUUID());
const retried = randomUUID();
await apiOrder(retried);
await apiOrder(retried);
const raced = randomUUID();
await Promise.all(Array.from({ length: 5 }, () => apiOrder(raced)));

if (process.env.DATABASE_URL) {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  await client.query(
    `insert into idempotency_keys (scope, procedure, key, fingerprint, state, lease_owner, locked_until, created_at, expires_at)
     select 'user:' || id, 'checkout.placeOrder', $1, repeat('0', 64), 'processing', gen_random_uuid(),
            now() - interval '3 minutes', now() - interval '4 minutes', now() + interval '1 day'
     from users where email = $2`,
    [randomUUID(), alice.email],
  );
  await client.end();
}

await page.goto(`${baseUrl}/admin/login`);
await page.getByLabel('Admin API token').fill(demoAdmin.token);
await page.getByRole('button', { name: 'Sign in' }).click();
await page.waitForURL(`${baseUrl}/admin`);
// The web process flushes its outcome counts every few seconds.
await page
  .getByTestId('outcome-chart')
  .filter({ hasText: 'checkout.placeOrder' })
  .getByTestId('total-replayed')
  .filter({ hasNotText: /^replayed0$/ })
  .waitFor({ timeout: 30_000 });
await page.getByLabel('Search keys').fill(retried);
await page.getByRole('button', { name: 'Search' }).click();
const retriedRow = page.getByRole('table', { name: 'Keys', exact: true }).locator(`[data-key="${retried}"]`);
// The search's own answer (the previous list stays up while it loads).
await retriedRow.filter({ hasText: 'matched by key' }).waitFor();
await page.screenshot({ path: 'docs/screenshot-admin.png', fullPage: true });

// The retried order's trail, once the webhook and the worker have shipped it (the page is server-rendered).
await retriedRow.getByRole('link').first().click();
await page.getByTestId('trail-step-5').waitFor();
for (let attempt = 0; attempt < 30; attempt += 1) {
  if ((await page.getByTestId('jobs').count()) > 0 && (await page.getByText('receipt →').count()) > 0) break;
  await page.waitForTimeout(1_000);
  await page.reload();
}
await page.screenshot({ path: 'docs/screenshot-admin-trail.png', fullPage: true });

await browser.close();
console.log(
  adminOnly
    ? 'wrote docs/screenshot-admin{,-trail}.png'
    : 'wrote docs/screenshot-{catalog,checkout,confirmation,admin,admin-trail}.png',
);
