import { metrics } from '~/server/observability/metrics';

export const dynamic = 'force-dynamic';

/** Prometheus scrape endpoint. */
export async function GET() {
  return new Response(await metrics.registry.metrics(), {
    headers: { 'content-type': metrics.registry.contentType },
  });
}
