/**
 * `pnpm bench:stores`: each store side by side in one run, through a tiny tRPC app per store (measure.ts): a new
 * key's claim + complete (external and transactional), a replay, a 50-request burst on one key (executions and
 * wall time), and throughput at 8 connections, the stores taking turns (BENCH_STORE_ROUNDS rounds) so that the
 * machine's load falls on all of them alike. One file per store exports its factory; a new store is one file
 * and one line in STORES. Prints a markdown table (docs/BENCHMARKS.md, "Stores", holds one run's).
 *
 * Knobs (environment): DATABASE_URL (Postgres server), MARIADB_URL (MariaDB server), BENCH_STORES (e.g.
 * postgres,mariadb,sqlite), BENCH_STORE_SAMPLES (500), BENCH_STORE_BURST (50), BENCH_STORE_BURST_MS (50: the burst's
 * procedure time), BENCH_STORE_CONNECTIONS (8), BENCH_STORE_SECONDS (5), BENCH_STORE_ROUNDS (5).
 */
import { closeEach, factoryOf, runStandalone } from '../standalone.ts';
import { formatMs } from '../storage/latency.ts';
import { mariadbStore } from './mariadb.ts';
import {
  type MeasureSettings,
  measureStores,
  prepareStore,
  type StoreApp,
  type StoreFigures,
} from './measure.ts';
import { postgresStore } from './postgres.ts';
import { sqliteStore } from './sqlite.ts';
import type { StoreFactory, StoreUnderTest } from './store-under-test.ts';

const STORES: Record<string, StoreFactory> = {
  postgres: postgresStore,
  mariadb: mariadbStore,
  sqlite: sqliteStore,
};

const number = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const settings: MeasureSettings = {
  samples: number('BENCH_STORE_SAMPLES', 500),
  burst: number('BENCH_STORE_BURST', 50),
  burstProcedureMs: number('BENCH_STORE_BURST_MS', 50),
  connections: number('BENCH_STORE_CONNECTIONS', 8),
  throughputSeconds: number('BENCH_STORE_SECONDS', 5),
  rounds: number('BENCH_STORE_ROUNDS', 5),
};
const chosen = (process.env.BENCH_STORES ?? Object.keys(STORES).join(',')).split(',');

function table(results: StoreFigures[]): string {
  const baseline = results[0];
  const ratio = (value: number, base: number | undefined) =>
    base && results.length > 1 ? ` (${(value / base).toFixed(2)}×)` : '';
  const rows = results.map((figures) => {
    const burst = (mode: 'external' | 'transactional') => {
      const b = figures.burst[mode];
      return `${b.executions} exec, ${b.wallMs.toFixed(0)} ms${b.errors ? `, ${b.errors} errors` : ''}`;
    };
    return (
      `| ${figures.name} | ${formatMs(figures.firstExternal.p50)}${ratio(figures.firstExternal.p50, baseline?.firstExternal.p50)} ` +
      `| ${formatMs(figures.firstTransactional.p50)}${ratio(figures.firstTransactional.p50, baseline?.firstTransactional.p50)} ` +
      `| ${formatMs(figures.replay.p50)}${ratio(figures.replay.p50, baseline?.replay.p50)} ` +
      `| ${burst('external')} | ${burst('transactional')} ` +
      `| ${figures.throughput.perSecond.toFixed(0)}${ratio(figures.throughput.perSecond, baseline?.throughput.perSecond)} |`
    );
  });
  return [
    `| store | new key, external: p50 ms | new key, transactional: p50 ms | replay: p50 ms | ${settings.burst} at once on one key, external | same, transactional | new keys/s at ${settings.connections} connections |`,
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    ...results.map((figures) => `- ${figures.name}: ${figures.durability}`),
    `- ${settings.samples} sequential samples per p50, the stores taking turns in ${settings.rounds} rounds; burst procedure ${settings.burstProcedureMs} ms, 409s retried after 20 ms; throughput over ${settings.throughputSeconds} s. Ratios against the first row.`,
  ].join('\n');
}

const opened: StoreUnderTest[] = [];
await runStandalone(
  'bench:stores',
  async () => {
    const apps: StoreApp[] = [];
    for (const id of chosen) {
      const under = await factoryOf(STORES, 'store', id)(settings.connections);
      opened.push(under);
      console.log(`[bench:stores] ${under.name} (${under.durability})`);
      apps.push(await prepareStore(under));
    }
    const results = await measureStores(apps, settings);
    return { table: table(results), results };
  },
  () => closeEach(opened),
);
