/**
 * The dashboard's headline numbers: the same database- and provider-backed values /api/metrics exposes (same
 * cached snapshots).
 */

import { PersistedCounter } from '@idem/contracts';
import type { Database } from '@idem/db';
import { databaseMetricsSnapshot } from '../observability/database-metrics.ts';
import { type GivenUpDeliveries, givenUpDeliveriesSnapshot } from '../observability/provider-metrics.ts';
import type { ProviderReader } from './provider-reader.ts';

export interface AdminOverview {
  keysInFlight: number;
  leasesExpired: number;
  /** Orders pending, or paid and not shipped, past their time: each one a customer waiting on nothing. */
  ordersPastTheirTime: number;
  /** The provider's webhooks given up in the last 24 h; null when the provider could not be asked. */
  webhookDeliveriesGivenUp: GivenUpDeliveries | null;
  webhookDuplicatesDropped: number;
  jobDuplicatesDropped: number;
  cleanupRuns: number;
  cleanupRowsRemoved: number;
}

export async function getAdminOverview(db: Database, provider?: ProviderReader): Promise<AdminOverview> {
  const [snapshot, givenUp] = await Promise.all([
    databaseMetricsSnapshot(db),
    givenUpDeliveriesSnapshot(provider).catch(() => null),
  ]);
  const sum = (name: string) =>
    snapshot.counters
      .filter((counter) => counter.name === name)
      .reduce((total, counter) => total + counter.value, 0);
  return {
    keysInFlight: snapshot.keysInFlight,
    leasesExpired: snapshot.leasesExpired,
    ordersPastTheirTime: snapshot.ordersPastTheirTime.pending + snapshot.ordersPastTheirTime.paid,
    webhookDeliveriesGivenUp: givenUp,
    webhookDuplicatesDropped: sum(PersistedCounter.webhookDuplicatesDropped),
    jobDuplicatesDropped: sum(PersistedCounter.jobDuplicatesDropped),
    cleanupRuns: sum(PersistedCounter.cleanupRuns),
    cleanupRowsRemoved: sum(PersistedCounter.cleanupRowsRemoved),
  };
}
