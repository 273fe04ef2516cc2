/**
 * Regenerates the README's screenshots from a running stack: `pnpm start`, then
 *   node --import tsx scripts/screenshots.ts [http://localhost:3000]
 */
import { chromium } from '@playwright/test';

const baseUrl = process.argv[2] ?? 'http://localhost:3000';
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium' });
const page = await browser.newPage({ viewport: { width: 1280, height: 860 }, deviceScaleFactor: 1 });

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

await browser.close();
console.log('wrote docs/screenshot-{catalog,checkout,confirmation}.png');
