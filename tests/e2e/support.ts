import { type BrowserContext, expect, type Page } from '@playwright/test';
import pg from 'pg';

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

/**
 * Keeps `page`'s payment in flight at the browser: its placeOrder requests wait there, unsent, until `send()`.
 * For a test that needs the paying tab to be waiting for its answer while it does something slow (open and load
 * another tab, run axe): the server has not seen the request, so no server-side timeout runs meanwhile (a charge
 * held at the provider is given up by the web app after 10 s). `waiting` resolves once a request is held.
 */
export async function holdPaymentInBrowser(
  page: Page,
): Promise<{ waiting: Promise<void>; send: () => void }> {
  let send = () => {};
  const sent = new Promise<void>((resolve) => {
    send = resolve;
  });
  let reached = () => {};
  const waiting = new Promise<void>((resolve) => {
    reached = resolve;
  });
  await page.route('**/api/trpc/checkout.placeOrder**', async (route) => {
    reached();
    await sent;
    // The page may have been closed meanwhile: its request then never leaves.
    await route.continue().catch(() => undefined);
  });
  return { waiting, send };
}

/**
 * Pays, and reloads while the server is charging: the charge is held at the provider until the old page is gone
 * (its request aborted with it), then released, so the server finishes the attempt with no tab waiting for the
 * answer. The reloaded page finds the attempt in doubt.
 */
export async function reloadMidPayment(page: Page) {
  await holdCharges();
  await payButton(page).click();
  await chargesHeld(1);
  await page.reload({ waitUntil: 'commit' });
  await releaseCharges();
}

/** The prefix of the checkout's intent record in localStorage: its intent id is `checkout:<owner>`. */
export const CHECKOUT_INTENT_PREFIX = 'idem:intent:checkout:';
/** The prefix of a paying tab's sign of life for the checkout's intent: `idem:alive:checkout:<owner>:<key>`. */
export const CHECKOUT_MARK_PREFIX = 'idem:alive:checkout:';

/** The localStorage name of the checkout intent this page's principal holds (there must be one). */
export async function checkoutIntentName(page: Page): Promise<string> {
  const name = await page.evaluate(
    (prefix) => Object.keys(localStorage).find((key) => key.startsWith(prefix)),
    CHECKOUT_INTENT_PREFIX,
  );
  if (!name) throw new Error('no checkout intent in this browser');
  return name;
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

/** Reloads the order page (where `expectConfirmation` left it) until the worker has shipped the order. */
export async function expectShipped(page: Page): Promise<void> {
  await expect
    .poll(
      async () => {
        await page.reload();
        return page.getByTestId('order-status').textContent();
      },
      { timeout: 30_000, intervals: [500] },
    )
    .toBe('Shipped');
}

/**
 * The orders this browser's guest session owns, newest first, with their status (`pending`, `paid`, `shipped`,
 * …): what its order history lists, asked through the API with the browser's cookies (`orders.list`) rather than
 * by loading the page in another tab.
 */
export async function orderStatusesOfThisBrowser(
  context: BrowserContext,
): Promise<Array<{ id: string; status: string }>> {
  const response = await context.request.get('/api/trpc/orders.list');
  expect(response.status(), 'orders.list').toBe(200);
  // A request without the browser's session would get a guest of its own (and no orders): never silently.
  expect(response.headers()['set-cookie'] ?? '', 'the browser session was sent').not.toContain(
    'idem_session=',
  );
  const body = (await response.json()) as {
    result: { data: { json: Array<{ id: string; status: string }> } };
  };
  return body.result.data.json.map(({ id, status }) => ({ id, status }));
}

/** The ids of the orders this browser's guest session owns, newest first. */
export async function ordersOfThisBrowser(context: BrowserContext): Promise<string[]> {
  return (await orderStatusesOfThisBrowser(context)).map((order) => order.id);
}

/**
 * Waits for the server to settle this browser's one order on its own (its charge released, no tab waiting for
 * the answer): it is paid, or shipped once the webhook and the worker got to it. Returns its id.
 */
export async function settledOrderOfThisBrowser(context: BrowserContext): Promise<string> {
  let orders: Array<{ id: string; status: string }> = [];
  await expect
    .poll(
      async () => {
        orders = await orderStatusesOfThisBrowser(context);
        return orders.map((order) => order.status);
      },
      { timeout: 20_000 },
    )
    .toEqual([expect.stringMatching(/^(paid|shipped)$/)]);
  return orders[0]?.id ?? '';
}

/** Counts the placeOrder HTTP requests the page sends. */
export function countPlaceOrderRequests(page: Page): () => number {
  let count = 0;
  page.on('request', (request) => {
    if (request.url().includes('/api/trpc/checkout.placeOrder')) count += 1;
  });
  return () => count;
}

/**
 * Sends the webhooks the provider held (`webhookHold`), in the given order, and returns each delivery's outcome.
 * It returns once every delivery (and each of its `webhookDuplicates` copies) has been answered by the web app.
 */
export async function flushProviderWebhooks(
  order: 'forward' | 'reverse' = 'forward',
): Promise<Array<{ event: string; type: string; delivered: boolean; status: number | null }>> {
  const response = await fetch(`${providerUrl}/__webhooks/flush`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ order }),
  });
  expect(response.ok).toBe(true);
  return (
    (await response.json()) as {
      data: Array<{ event: string; type: string; delivered: boolean; status: number | null }>;
    }
  ).data;
}

/**
 * Runs `use` with a client on the stack's database (a scratch database the e2e stack made), found as the one
 * holding `orderId`: on the embedded server at `embeddedPort` (default E2E_PG_PORT), or on DATABASE_URL's server
 * when the stack was given one (other runs' scratch databases may be there too).
 */
export async function withStackDatabase<T>(
  orderId: string,
  use: (client: pg.Client) => Promise<T>,
  embeddedPort = process.env.E2E_PG_PORT ?? '54339',
): Promise<T> {
  const server = new URL(
    process.env.DATABASE_URL ?? `postgresql://postgres:postgres@127.0.0.1:${embeddedPort}/postgres`,
  );
  server.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: server.toString() });
  await admin.connect();
  const { rows } = await admin
    .query<{ datname: string }>(`select datname from pg_database where datname like 'idem\\_e2e\\_%'`)
    .finally(() => admin.end());
  for (const { datname } of rows) {
    const url = new URL(server);
    url.pathname = `/${datname}`;
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      const found = await client
        .query('select 1 from orders where id = $1', [orderId])
        .catch(() => ({ rowCount: 0 }));
      if (found.rowCount === 1) return await use(client);
    } finally {
      await client.end();
    }
  }
  throw new Error(`no e2e database holds order ${orderId}`);
}

/**
 * The states of the fulfilment jobs queued for `orderId` (pg-boss's `fulfilment` queue in the `pgboss` schema,
 * as the stack's worker runs it), oldest first: `created`, `active`, `retry`, `completed`, `failed`, ….
 */
export async function fulfilmentJobStates(orderId: string): Promise<string[]> {
  return withStackDatabase(orderId, async (client) => {
    const { rows } = await client.query<{ state: string }>(
      `select state::text from pgboss.job where name = 'fulfilment' and data->>'orderId' = $1
       order by created_on, id`,
      [orderId],
    );
    return rows.map((row) => row.state);
  });
}
