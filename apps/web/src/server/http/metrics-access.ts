/**
 * Who may scrape GET /api/metrics. The metrics name procedures, outcomes and counts of the shop's traffic, so a
 * production server does not show them to anyone: with METRICS_TOKEN set, `Authorization: Bearer <token>` is
 * required (everywhere); unset, the endpoint is open outside production and closed in production.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export type MetricsAccess = { ok: true } | { ok: false; response: Response };

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

export function checkMetricsAccess(
  headers: Headers,
  { token, production }: { token: string | undefined; production: boolean },
): MetricsAccess {
  if (token === undefined) {
    if (!production) return { ok: true };
    return {
      ok: false,
      response: Response.json(
        { error: 'Metrics are disabled in production until METRICS_TOKEN is set.' },
        { status: 403 },
      ),
    };
  }
  const presented = /^Bearer[ ]+(\S+)\s*$/i.exec(headers.get('authorization') ?? '')?.[1];
  // Fixed-length digests compared in constant time: the timing does not reveal how much of a guess matched.
  if (presented !== undefined && timingSafeEqual(digest(presented), digest(token))) return { ok: true };
  return {
    ok: false,
    response: Response.json(
      { error: 'Send the metrics token: Authorization: Bearer <METRICS_TOKEN>.' },
      { status: 401, headers: { 'WWW-Authenticate': 'Bearer realm="metrics"' } },
    ),
  };
}
