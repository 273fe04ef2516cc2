/** Runs in every test worker before the test files: point app code at this run's database. */
import { inject } from 'vitest';

process.env.DATABASE_URL = inject('databaseUrl');
// The suites place hundreds of orders with a handful of principals within minutes, far past the production
// limit on new orders per principal (IDEM_NEW_ORDERS_PER_PRINCIPAL, default 30 per 10 min): lifted here, and
// inherited by the web processes the fault suites start. tests/adversarial/new-order-limit.test.ts builds a
// router with a low limit of its own.
process.env.IDEM_NEW_ORDERS_PER_PRINCIPAL ??= '1000000';
