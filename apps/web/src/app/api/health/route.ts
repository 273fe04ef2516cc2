import { db } from '~/server/db';

export const dynamic = 'force-dynamic';

/** Liveness plus a database round trip: what a load balancer or the dev script waits for. */
export async function GET() {
  try {
    await db.$queryRaw`select 1`;
    return Response.json({ ok: true });
  } catch (error) {
    return Response.json(
      { ok: false, error: error instanceof Error ? error.message : String(error) },
      { status: 503 },
    );
  }
}
