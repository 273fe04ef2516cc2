'use client';

import { Area, AreaChart, Bar, BarChart, CartesianGrid, Legend, Tooltip, XAxis, YAxis } from 'recharts';
import type { Outcome, OutcomeSeries } from '~/server/admin/outcome-series';
import { OUTCOME_COLORS, OUTCOME_HELP } from './format';

const OUTCOMES = Object.keys(OUTCOME_COLORS) as Outcome[];

function tickFormatter(stepSeconds: number) {
  return (t: number) => {
    const iso = new Date(t).toISOString();
    return stepSeconds >= 3600 ? `${iso.slice(5, 10)} ${iso.slice(11, 13)}h` : iso.slice(11, 16);
  };
}

const labelFormatter = (label: unknown) =>
  typeof label === 'number' ? `${new Date(label).toISOString().slice(0, 16).replace('T', ' ')} UTC` : '';

/** One stacked bar chart per procedure: what happened to its requests, per time bucket. */
export function OutcomeCharts({ series }: { series: OutcomeSeries }) {
  const formatTick = tickFormatter(series.stepSeconds);
  if (series.procedures.length === 0) {
    return (
      <p className="rounded-xl border border-dashed border-stone-300 p-6 text-sm text-stone-500">
        No idempotent requests in this range yet. Counts reach the dashboard within a few seconds of a
        request.
      </p>
    );
  }
  return (
    <div className="grid gap-6">
      {series.procedures.map(({ procedure, points, totals }) => (
        <figure
          key={procedure}
          className="rounded-xl border border-stone-200 bg-white p-4"
          data-testid="outcome-chart"
          data-procedure={procedure}
        >
          <figcaption className="mb-2 flex flex-wrap items-baseline justify-between gap-2">
            <span className="font-mono text-sm font-semibold">{procedure}</span>
            <span className="text-xs text-stone-500">
              requests per {series.stepSeconds >= 3600 ? 'hour' : `${series.stepSeconds / 60} min`}
            </span>
          </figcaption>
          <BarChart responsive style={{ width: '100%', height: 220 }} data={points} barCategoryGap={1}>
            <CartesianGrid strokeDasharray="3 3" vertical={false} stroke="#e7e5e4" />
            <XAxis dataKey="t" tickFormatter={formatTick} minTickGap={24} fontSize={11} />
            <YAxis allowDecimals={false} width={36} fontSize={11} />
            <Tooltip labelFormatter={labelFormatter} />
            <Legend wrapperStyle={{ fontSize: 12 }} />
            {OUTCOMES.map((outcome) => (
              <Bar
                key={outcome}
                dataKey={outcome}
                stackId="outcomes"
                fill={OUTCOME_COLORS[outcome]}
                isAnimationActive={false}
              />
            ))}
          </BarChart>
          <dl
            className="mt-3 grid grid-cols-3 gap-2 text-xs sm:grid-cols-6"
            aria-label={`${procedure} totals`}
          >
            {OUTCOMES.map((outcome) => (
              <div key={outcome} title={OUTCOME_HELP[outcome]} data-testid={`total-${outcome}`}>
                <dt className="text-stone-500">{outcome}</dt>
                <dd className="font-mono text-sm">{totals[outcome]}</dd>
              </div>
            ))}
          </dl>
        </figure>
      ))}
    </div>
  );
}

/** The value of the whole thing: every replay and every 409 is a duplicate that did not run twice. */
export function DuplicatesPreventedChart({ series }: { series: OutcomeSeries }) {
  return (
    <figure className="rounded-xl border border-stone-200 bg-white p-4" data-testid="duplicates-chart">
      <figcaption className="mb-2 flex flex-wrap items-baseline justify-between gap-2">
        <span className="text-sm font-semibold">Duplicates prevented, running total</span>
        <span className="text-xs text-stone-500">replays + 409s, every procedure, since the stats began</span>
      </figcaption>
      <AreaChart responsive style={{ width: '100%', height: 200 }} data={series.duplicatesPrevented}>
        <CartesianGrid strokeDasharray="3 3" vertical={false} stroke="#e7e5e4" />
        <XAxis dataKey="t" tickFormatter={tickFormatter(series.stepSeconds)} minTickGap={24} fontSize={11} />
        <YAxis allowDecimals={false} width={36} fontSize={11} />
        <Tooltip labelFormatter={labelFormatter} />
        <Area
          type="stepAfter"
          dataKey="runningTotal"
          name="duplicates prevented"
          stroke={OUTCOME_COLORS.replayed}
          fill="#bae6fd"
          isAnimationActive={false}
        />
      </AreaChart>
    </figure>
  );
}
