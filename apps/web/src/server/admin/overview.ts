/** The dashboard's headline numbers: the same database-backed values /api/metrics exposes (same cached snapshot). */

import { PersistedCounter } from '@idem/contracts';
import type { Database } from '@idem/db';
import { databaseMetricsSnapshot } from '../observability/database-metrics.ts';

export interface AdminOverview {
  keysInFlight: number;
  leasesExpired: number;
  /** Orders pending, or paid and not shipped, past their time: each one a customer waiting on nothing. */
  ordersPastTheirTime: number;
  webhookDuplicatesDropped: number;
  jobDuplicatesDropped: number;
  cleanupRuns: number;
  cleanupRowsRemoved: number;
}

export async function getAdminOverview(db: Database): Promise<AdminOverview> {
  const snapshot = await databaseMetricsSnapshot(db);
  const sum = (name: string) =>
    snapshot.counters
      .filter((counter) => counter.name === name)
      .reduce((total, counter) => total + counter.value, 0);
  return {
    keysInFlight: snapshot.keysInFlight,
    leasesExpired: snapshot.leasesExpired,
    ordersPastTheirTime: snapshot.ordersPastTheirTime.pending + snapshot.ordersPastTheirTime.paid,
    webhookDuplicatesDropped: sum(PersistedCounter.webhookDuplicatesDropped),
    jobDuplicatesDropped: sum(PersistedCounter.jobDuplicatesDropped),
    cleanupRuns: sum(PersistedCounter.cleanupRuns),
    cleanupRowsRemoved: sum(PersistedCounter.cleanupRowsRemoved),
  };
}
