/** @idem/contracts against a real Postgres: the counter upsert adds up, and the derived names stay what both sides expect. */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CounterId,
  incrementCounter,
  incrementCounterSql,
  PersistedCounter,
  providerChargeKey,
  Queue,
  WorkerCounter,
} from '../src/index.ts';

const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL is not set (tests/setup/database.ts provides it)');

describe('providerChargeKey and Queue', () => {
  it('derives the processor key from the order id alone', () => {
    expect(providerChargeKey('0b6f7c1e-2a4d-4a7e-9d8e-1c2b3a4d5e6f')).toBe(
      'order_0b6f7c1e-2a4d-4a7e-9d8e-1c2b3a4d5e6f',
    );
  });

  it('names the queues', () => {
    expect(Queue).toEqual({
      fulfilment: 'fulfilment',
      cleanup: 'idem-cleanup',
      reconcile: 'payments-reconcile',
    });
  });

  it('builds every worker counter from a persisted counter name', () => {
    const names = new Set<string>(Object.values(PersistedCounter));
    const ids: CounterId[] = [
      WorkerCounter.cleanupRuns,
      WorkerCounter.keysRemoved,
      WorkerCounter.processedEventsRemoved,
      WorkerCounter.fulfilmentDuplicatesDropped,
      ...Object.values(WorkerCounter.ordersReconciled),
    ];
    for (const id of ids) expect(names.has(id.name)).toBe(true);
  });
});

describe('incrementCounter', () => {
  const client = new pg.Client({ connectionString: url });
  const runner = {
    $executeRawUnsafe: async (query: string, ...values: unknown[]) =>
      (await client.query(query, values)).rowCount ?? 0,
  };

  beforeAll(async () => {
    await client.connect();
    // A private copy, first in the search path, so the shared table of the scratch database is untouched.
    await client.query('create schema if not exists contracts_test');
    await client.query('set search_path = contracts_test, public');
    await client.query(
      `create table if not exists contracts_test.operational_counters
         (name text not null, label text not null, value bigint not null, updated_at timestamptz not null,
          primary key (name, label))`,
    );
  });
  afterAll(async () => {
    await client.query('drop schema contracts_test cascade');
    await client.end();
  });

  const counterValue = async (name: string, label: string) =>
    (
      await client.query<{ value: string }>(
        'select value::text from operational_counters where name = $1 and label = $2',
        [name, label],
      )
    ).rows[0]?.value ?? null;

  it('creates the row, then adds to it', async () => {
    await incrementCounter(runner, WorkerCounter.cleanupRuns);
    await incrementCounter(runner, WorkerCounter.cleanupRuns, 4);
    expect(await counterValue('cleanup_runs', '')).toBe('5');
  });

  it('writes nothing for zero and refuses negative or fractional amounts', async () => {
    await incrementCounter(runner, WorkerCounter.ordersReconciled.paid, 0);
    expect(await counterValue('orders_reconciled', 'paid')).toBeNull();
    await expect(incrementCounter(runner, WorkerCounter.ordersReconciled.paid, -1)).rejects.toThrow(
      RangeError,
    );
    await expect(incrementCounter(runner, WorkerCounter.ordersReconciled.paid, 1.5)).rejects.toThrow(
      RangeError,
    );
  });

  it('embeds in a larger statement that counts what it did', async () => {
    await client.query(
      incrementCounterSql('select $1, $2, count(*), now() from generate_series(1, 3) having count(*) > 0'),
      ['job_duplicates_dropped', 'fulfilment'],
    );
    expect(await counterValue('job_duplicates_dropped', 'fulfilment')).toBe('3');
  });
});
