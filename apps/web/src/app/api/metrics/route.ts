import { env } from '~/env';
import { db } from '~/server/db';
import { checkMetricsAccess } from '~/server/http/metrics-access';
import { refreshDatabaseMetrics } from '~/server/observability/database-metrics';
import { metrics } from '~/server/observability/metrics';
import { refreshProviderMetrics } from '~/server/observability/provider-metrics';

export const dynamic = 'force-dynamic';

/**
 * Prometheus scrape endpoint: this process's request metrics, plus the database-backed ones (keys in flight,
 * expired leases, the worker's and the webhook receiver's persisted counters) and the provider's given-up webhook
 * deliveries, read fresh on every scrape.
 * Guarded by METRICS_TOKEN (server/http/metrics-access.ts). Called without a request (tests), it is a scrape
 * that presents no token.
 */
export async function GET(request?: Request) {
  const access = checkMetricsAccess(request?.headers ?? new Headers(), {
    token: env.METRICS_TOKEN,
    production: env.production,
  });
  if (!access.ok) return access.response;
  await Promise.all([refreshDatabaseMetrics(db), refreshProviderMetrics()]);
  return new Response(await metrics.registry.metrics(), {
    headers: { 'content-type': metrics.registry.contentType },
  });
}
