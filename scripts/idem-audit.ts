/**
 * `pnpm idem:audit`: the order invariant (apps/worker/src/jobs/audit.ts) against a live database — orders pending
 * or paid-but-unshipped past their time and, asking the provider, money kept that does not match an order's
 * state. Prints one line per violation and exits 1 if there is any; read-only.
 *
 * DATABASE_URL (default: the `pnpm dev` database), PROVIDER_URL and PROVIDER_SECRET_KEY (the provider's; unset
 * PROVIDER_URL to skip the money check), IDEM_AUDIT_SETTLE_WITHIN_SECONDS (default 900).
 */
import { createPrismaClient } from '@idem/db';
import { EMBEDDED_PASSWORD, EMBEDDED_USER } from '@idem/dev-db/postgres';
import { createProviderClient } from '@idem/payments';
import { auditOrders } from '@idem/worker';

const embeddedDevUrl = `postgresql://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${process.env.EMBEDDED_PG_PORT ?? 54329}/idem`;
const db = createPrismaClient({ connectionString: process.env.DATABASE_URL ?? embeddedDevUrl, max: 1 });
const providerUrl = process.env.PROVIDER_URL ?? 'http://127.0.0.1:4000';
const provider =
  providerUrl === ''
    ? undefined
    : createProviderClient({
        baseUrl: providerUrl,
        secretKey: process.env.PROVIDER_SECRET_KEY ?? 'sk_test_idem',
        timeoutMs: 10_000,
      });

try {
  const violations = await auditOrders(
    { db, ...(provider ? { provider } : {}) },
    { settleWithinSeconds: Number(process.env.IDEM_AUDIT_SETTLE_WITHIN_SECONDS ?? 900) },
  );
  for (const violation of violations)
    console.log(`${violation.kind}\t${violation.orderId}\t${violation.detail}`);
  console.log(
    `idem:audit: ${violations.length} violation(s)${provider ? '' : ' (money not checked: PROVIDER_URL is empty)'}`,
  );
  if (violations.length > 0) process.exitCode = 1;
} catch (error) {
  console.error(`idem:audit failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 2;
} finally {
  await db.$disconnect();
}
