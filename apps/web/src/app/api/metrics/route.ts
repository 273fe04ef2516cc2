import { db } from '~/server/db';
import { refreshDatabaseMetrics } from '~/server/observability/database-metrics';
import { metrics } from '~/server/observability/metrics';

export const dynamic = 'force-dynamic';

/**
 * Prometheus scrape endpoint: this process's request metrics, plus the database-backed ones (keys in flight,
 * expired leases, the worker's and the webhook receiver's persisted counters), read fresh on every scrape.
 */
export async function GET() {
  await refreshDatabaseMetrics(db);
  return new Response(await metrics.registry.metrics(), {
    headers: { 'content-type': metrics.registry.contentType },
  });
}
