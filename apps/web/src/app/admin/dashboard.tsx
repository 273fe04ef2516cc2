'use client';

import { keepPreviousData, useQuery, useQueryClient } from '@tanstack/react-query';
import { usePathname, useRouter } from 'next/navigation';
import { type FormEvent, useState } from 'react';
import type { OutcomeRange } from '~/server/admin/outcome-series';
import { useTRPC } from '~/trpc/react';
import { EvictionRule } from './eviction-rule';
import { KeyTable } from './key-table';
import { DuplicatesPreventedChart, OutcomeCharts } from './outcome-charts';

const REFRESH_MS = 5_000;
const RANGES: Array<{ value: OutcomeRange; label: string }> = [
  { value: '1h', label: 'Last hour' },
  { value: '6h', label: '6 hours' },
  { value: '24h', label: '24 hours' },
  { value: '7d', label: '7 days' },
];

export function AdminDashboard({ initialQuery }: { initialQuery: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const router = useRouter();
  const pathname = usePathname();
  const [range, setRange] = useState<OutcomeRange>('1h');
  const [draft, setDraft] = useState(initialQuery);
  const [query, setQuery] = useState(initialQuery);

  const live = { refetchInterval: REFRESH_MS, staleTime: 0 } as const;
  const overview = useQuery(trpc.admin.overview.queryOptions(undefined, live));
  const outcomes = useQuery(trpc.admin.outcomes.queryOptions({ range }, live));
  // A scan of the processing keys: polled less often than the cached counters.
  const stuck = useQuery(
    trpc.admin.stuckKeys.queryOptions(undefined, { refetchInterval: 15_000, staleTime: 0 }),
  );
  const search = useQuery(
    trpc.admin.searchKeys.queryOptions({ query }, { staleTime: 0, placeholderData: keepPreviousData }),
  );
  const now = outcomes.dataUpdatedAt || Date.now();

  const refreshKeys = () => {
    void queryClient.invalidateQueries({ queryKey: trpc.admin.pathKey() });
  };
  const submitSearch = (event: FormEvent) => {
    event.preventDefault();
    const next = draft.trim();
    setQuery(next);
    router.replace(next ? `${pathname}?q=${encodeURIComponent(next)}` : pathname, { scroll: false });
  };

  const givenUp = overview.data?.webhookDeliveriesGivenUp;
  const tiles = [
    {
      label: 'Duplicates prevented',
      value: outcomes.data?.duplicatesPreventedTotal,
      hint: 'replays + 409s, all time',
    },
    { label: 'Keys in flight', value: overview.data?.keysInFlight, hint: 'processing, lease live' },
    {
      label: 'Stuck keys',
      value: overview.data?.leasesExpired,
      hint: 'processing, lease ended',
      alarm: (overview.data?.leasesExpired ?? 0) > 0,
    },
    {
      label: 'Orders past their time',
      value: overview.data?.ordersPastTheirTime,
      hint: 'pending or paid-unshipped > 15 min',
      alarm: (overview.data?.ordersPastTheirTime ?? 0) > 0,
    },
    {
      label: 'Webhooks given up',
      value: overview.data ? (givenUp ? `${givenUp.count}${givenUp.atLeast ? '+' : ''}` : '—') : undefined,
      hint: givenUp === null ? 'provider unreachable' : 'by the provider, last 24 h',
      // A full page of undelivered events is an alarm too: the given-up ones may lie past it.
      alarm: givenUp === null || (givenUp !== undefined && (givenUp.count > 0 || givenUp.atLeast)),
    },
    {
      label: 'Webhook duplicates dropped',
      value: overview.data?.webhookDuplicatesDropped,
      hint: 'processed_events',
    },
    {
      label: 'Job duplicates dropped',
      value: overview.data?.jobDuplicatesDropped,
      hint: 'shipments / receipts',
    },
    {
      label: 'Cleanup',
      value: overview.data ? `${overview.data.cleanupRuns} / ${overview.data.cleanupRowsRemoved}` : undefined,
      hint: 'runs / rows removed',
    },
  ];

  return (
    <div className="space-y-10">
      <section aria-label="Overview" className="grid grid-cols-2 gap-3 md:grid-cols-4">
        {tiles.map((tile) => (
          <div
            key={tile.label}
            className={`rounded-xl border bg-white p-4 ${
              'alarm' in tile && tile.alarm ? 'border-red-300' : 'border-stone-200'
            }`}
            data-testid="overview-tile"
          >
            <p className="text-xs text-stone-500">{tile.label}</p>
            <p className="mt-1 font-mono text-2xl font-semibold">{tile.value ?? '…'}</p>
            <p className="text-xs text-stone-600">{tile.hint}</p>
          </div>
        ))}
      </section>

      <section aria-labelledby="outcomes-heading" className="space-y-4">
        <div className="flex flex-wrap items-center justify-between gap-3">
          <h2 id="outcomes-heading" className="text-lg font-semibold">
            Outcomes per procedure
          </h2>
          <label className="flex items-center gap-2 text-sm text-stone-600">
            Range
            <select
              value={range}
              onChange={(event) => setRange(event.target.value as OutcomeRange)}
              className="rounded-lg border border-stone-300 bg-white px-2 py-1"
            >
              {RANGES.map((option) => (
                <option key={option.value} value={option.value}>
                  {option.label}
                </option>
              ))}
            </select>
          </label>
        </div>
        {outcomes.data ? (
          <>
            <DuplicatesPreventedChart series={outcomes.data} />
            <OutcomeCharts series={outcomes.data} />
          </>
        ) : (
          <p className="text-sm text-stone-500">{outcomes.error ? outcomes.error.message : 'Loading…'}</p>
        )}
      </section>

      <section aria-labelledby="stuck-heading" className="space-y-4">
        <h2 id="stuck-heading" className="text-lg font-semibold">
          Stuck keys
        </h2>
        {stuck.data && stuck.data.length > 0 ? (
          <KeyTable keys={stuck.data} now={now} onEvicted={refreshKeys} label="Stuck keys" />
        ) : (
          <p className="text-sm text-stone-500">
            {stuck.data ? 'None: every processing key has a live lease.' : 'Loading…'}
          </p>
        )}
        <EvictionRule />
      </section>

      <section aria-labelledby="keys-heading" className="space-y-4">
        <h2 id="keys-heading" className="text-lg font-semibold">
          Key browser
        </h2>
        <search>
          <form onSubmit={submitSearch} className="flex gap-3">
            <input
              value={draft}
              onChange={(event) => setDraft(event.target.value)}
              aria-label="Search keys"
              placeholder="A key, an order id, a principal (user:…, guest:…, email) or a log key_hash"
              className="flex-1 rounded-lg border border-stone-300 px-3 py-2 font-mono text-sm focus:border-brand-600 focus:outline-none"
            />
            <button
              type="submit"
              className="rounded-full bg-stone-900 px-5 py-2 text-sm font-medium text-white hover:bg-stone-700"
            >
              Search
            </button>
          </form>
        </search>
        {search.data ? (
          search.data.keys.length > 0 ? (
            <KeyTable keys={search.data.keys} now={now} onEvicted={refreshKeys} label="Keys" />
          ) : (
            <p className="text-sm text-stone-500" data-testid="no-keys">
              No keys match “{search.data.query}”. Keys live for their retention window (24 h by default).
            </p>
          )
        ) : (
          <p className="text-sm text-stone-500">{search.error ? search.error.message : 'Loading…'}</p>
        )}
      </section>
    </div>
  );
}
