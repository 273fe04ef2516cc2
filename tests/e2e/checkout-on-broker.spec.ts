/**
 * The checkout with its fulfilment on a message broker (issue 30), in the browser: two more stacks
 * (`scripts/stack.ts e2e`: a fresh database, the provider, the worker, `next start`), one with
 * QUEUE_URL=amqp://… (RabbitMQ) and one with QUEUE_URL=nats://… (NATS JetStream), each under a namespace of its
 * own. A purchase ends Shipped, and the stack's database shows the way it went: one message in the outbox,
 * marked sent (the relay had the broker's confirm), its id completed in the worker's inbox, and no pg-boss
 * fulfilment job at all; the admin's key trail shows the message's hops.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { demoAdmin } from '@idem/dev-db/seed-data';
import { expect, test } from '@playwright/test';
import {
  type ManagedProcess,
  startProcess,
  stopProcesses,
  waitForOutput,
} from '../../scripts/lib/processes.ts';
import { expectConfirmation, expectShipped, payButton, readyToPay, withStackDatabase } from './support.ts';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const webPort = Number(process.env.E2E_PORT ?? 3100);
const providerPort = Number(process.env.E2E_PROVIDER_PORT ?? 4100);
const pgPort = Number(process.env.E2E_PG_PORT ?? 54339);

const BROKERS = [
  { name: 'RabbitMQ', queueUrl: 'amqp://guest:guest@127.0.0.1:5672', offset: 1 },
  { name: 'NATS JetStream', queueUrl: 'nats://127.0.0.1:4222', offset: 2 },
] as const;

const stacks = new Map<string, ManagedProcess>();

// Both stacks start at once: most of a start is waiting (migrations, next start, the provider).
test.beforeAll(async () => {
  test.setTimeout(240_000);
  await Promise.all(
    BROKERS.map(async (broker) => {
      const stack = startProcess(
        `stack:${broker.name}`,
        process.execPath,
        ['--import', 'tsx', 'scripts/stack.ts', 'e2e'],
        {
          cwd: repoRoot,
          env: {
            ...process.env,
            PORT: String(webPort + broker.offset),
            PROVIDER_PORT: String(providerPort + broker.offset),
            EMBEDDED_PG_PORT: String(pgPort + broker.offset),
            PROVIDER_SECRET_KEY: `sk_e2e_${randomBytes(32).toString('base64url')}`,
            METRICS_TOKEN: `idem_metrics_e2e_${randomBytes(32).toString('base64url')}`,
            QUEUE_URL: broker.queueUrl,
            QUEUE_NAMESPACE: `e2e-${randomBytes(4).toString('hex')}`,
          },
          color: 34,
        },
      );
      stacks.set(broker.name, stack);
      await waitForOutput(stack, /checkout ready at/, 200_000);
    }),
  );
});

test.afterAll(async () => {
  await stopProcesses([...stacks.values()], 15_000);
});

for (const broker of BROKERS) {
  test.describe(`fulfilment on ${broker.name} (QUEUE_URL)`, () => {
    test.use({ baseURL: `http://127.0.0.1:${webPort + broker.offset}` });

    test('a purchase ships through the outbox, the broker and the worker inbox; pg-boss carries no fulfilment; the trail shows the hops', async ({
      page,
    }) => {
      await readyToPay(page);
      await payButton(page).click();
      const orderId = await expectConfirmation(page);
      await expectShipped(page);

      const way = await withStackDatabase(
        orderId,
        async (client) => {
          const messages = await client.query<{ id: string; sent: boolean }>(
            `select id, sent_at is not null as sent from idempotency_outbox
              where type = 'fulfilment' and body::jsonb ->> 'orderId' = $1`,
            [orderId],
          );
          const inbox = await client.query<{ state: string }>(
            `select state from idempotency_keys where scope = 'worker' and procedure = 'fulfilment' and key = $1`,
            [messages.rows[0]?.id ?? ''],
          );
          const jobs = await client.query<{ n: number }>(
            `select count(*)::int as n from pgboss.job where name = 'fulfilment' and data->>'orderId' = $1`,
            [orderId],
          );
          return {
            messages: messages.rows.map((row) => row.sent),
            inbox: inbox.rows.map((row) => row.state),
            pgBossJobs: jobs.rows[0]?.n,
          };
        },
        String(pgPort + broker.offset),
      );
      expect(way).toEqual({ messages: [true], inbox: ['completed'], pgBossJobs: 0 });

      await page.goto('/admin/login');
      await page.getByLabel('Admin API token').fill(demoAdmin.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect(page).toHaveURL(/\/admin$/);
      await page.getByLabel('Search keys').fill(orderId);
      await page.getByRole('button', { name: 'Search' }).click();
      const row = page
        .getByRole('table', { name: 'Keys', exact: true })
        .getByTestId('key-row')
        .filter({ hasText: 'matched by order' });
      await row.getByRole('link').click();
      const jobs = page.getByTestId('trail-step-5');
      await expect(jobs).toContainText('1 job');
      await expect(jobs.getByTestId('jobs')).toContainText(
        /completed.*broker message: published 20\S+Z, consumed by the worker's inbox 20\S+Z/,
      );
    });
  });
}
