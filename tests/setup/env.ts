/** Runs in every test worker before the test files: point app code at this run's database. */
import { inject } from 'vitest';

process.env.DATABASE_URL = inject('databaseUrl');
// The suites place hundreds of orders with a handful of principals, all from 127.0.0.1, within minutes: far past
// the production limits on new orders (IDEM_NEW_ORDERS_PER_PRINCIPAL 30 and IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS 60
// per 10 min, IDEM_PENDING_ORDERS_PER_PRINCIPAL 5 at once). Lifted here, and inherited by the web processes the
// fault suites start; tests/adversarial/new-order-limit.test.ts builds routers with low limits of its own.
process.env.IDEM_NEW_ORDERS_PER_PRINCIPAL ??= '1000000';
process.env.IDEM_NEW_ORDERS_PER_CLIENT_ADDRESS ??= '1000000';
process.env.IDEM_PENDING_ORDERS_PER_PRINCIPAL ??= '1000000';
