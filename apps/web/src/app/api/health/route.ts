import { db } from '~/server/db';
import { logger } from '~/server/observability/log';

export const dynamic = 'force-dynamic';

/**
 * Liveness plus a database round trip: what a load balancer or the dev script waits for. The database's own
 * error goes to the log, never into the body (it names hosts, users and tables).
 */
export async function GET() {
  try {
    await db.$queryRaw`select 1`;
    return Response.json({ ok: true });
  } catch (error) {
    logger.error(
      { err: error instanceof Error ? error.message : String(error) },
      'health: database unreachable',
    );
    return Response.json({ ok: false, error: 'database unreachable' }, { status: 503 });
  }
}
