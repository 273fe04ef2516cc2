/**
 * Webhooks the provider gave up on, read from its API at scrape time the way a shop reads Stripe's
 * (`GET /v1/events?delivery_success=false`): the events of the last `GIVEN_UP_WINDOW_HOURS` whose delivery
 * failed every attempt. The reconciler settles their orders without them (a paid order with no fulfilment job
 * gets one); this count is what tells an operator the webhook endpoint is unreachable, misconfigured or refusing
 * signatures (clock skew, a rotated secret) before customers do.
 */

import { env } from '~/env';
import { createProviderReader, type ProviderReader } from '../admin/provider-reader.ts';
import { logger } from './log.ts';
import { metrics } from './metrics.ts';
import { sharedRead } from './shared-read.ts';

export const GIVEN_UP_WINDOW_HOURS = 24;

export interface GivenUpDeliveries {
  /** Events of the window whose every delivery attempt failed (among the newest undelivered page). */
  count: number;
  /** More undelivered events than one page lists: `count` is a lower bound. */
  atLeast: boolean;
}

export async function readGivenUpDeliveries(
  reader: ProviderReader,
  now: Date = new Date(),
): Promise<GivenUpDeliveries> {
  const since = new Date(now.getTime() - GIVEN_UP_WINDOW_HOURS * 3_600_000);
  const { events, hasMore } = await reader.listUndeliveredEvents(since);
  return { count: events.filter((event) => event.delivery?.failed_at != null).length, atLeast: hasMore };
}

/** Shared by scrapes and open dashboards, like the database snapshot: one provider read per 10 s. */
const MAX_AGE_MS = 10_000;
const snapshots = sharedRead((reader: ProviderReader) => readGivenUpDeliveries(reader));
let fromEnv: ProviderReader | undefined;

// A scrape waits for this read: 2 s at most, well inside Prometheus' 10 s scrape timeout.
const defaultReader = () =>
  (fromEnv ??= createProviderReader({
    baseUrl: env.PROVIDER_URL,
    secretKey: env.PROVIDER_SECRET_KEY,
    timeoutMs: 2_000,
  }));

/** The last read if younger than 10 s, else a fresh one. */
export function givenUpDeliveriesSnapshot(
  reader: ProviderReader = defaultReader(),
): Promise<GivenUpDeliveries> {
  return snapshots(reader, MAX_AGE_MS);
}

/** Loads the read into the registry. Never throws: an unreachable provider sets idem_metrics_provider_up 0. */
export async function refreshProviderMetrics(reader: ProviderReader = defaultReader()): Promise<void> {
  try {
    const { count } = await givenUpDeliveriesSnapshot(reader);
    metrics.webhookDeliveriesGivenUp.set(count);
    metrics.providerUp.set(1);
  } catch (error) {
    metrics.providerUp.set(0);
    logger.warn(
      { err: error instanceof Error ? error.message : String(error) },
      'provider metrics unavailable',
    );
  }
}
