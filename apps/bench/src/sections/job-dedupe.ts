/**
 * The worker's job dedupe, per job: `fulfilOrder` on the paid orders the checkout section left, interleaved — a
 * first delivery as the worker runs it, a first delivery of another order with the dedupe switched off (the crash
 * tests' control: the database writes the receipt under a kind of its own, fault-triggers.ts), and a second
 * delivery of the first order (a duplicate the unique keys absorb). Every arm's sessions pass through the same
 * trigger function (the two deduplicated arms' with nothing to do), so the trigger's cost is in all three.
 */
import { performance } from 'node:perf_hooks';
import { createPrismaClient } from '@idem/db';
import { fulfilOrder } from '@idem/worker';
import { installFaultTriggers } from '../../../worker/test/fault-triggers.ts';
import { log } from '../log.ts';
import type { BenchOptions } from '../options.ts';
import { median } from '../stats.ts';
import { type Figure, figure } from '../summary.ts';
import type { SectionContext, Skipped } from './context.ts';

export const name = 'worker job dedupe';

export function plannedSeconds(options: BenchOptions): number {
  return (options.jobs * 3 * 8) / 1000;
}

export interface JobDedupe {
  jobs: number;
  /** First delivery of a fulfilment job, the receipt deduplicated by the unique (order_id, 'receipt'). */
  firstP50: number;
  /** The same first delivery with the dedupe off (the receipt under a kind per delivery): the baseline. */
  withoutDedupeP50: number;
  /** A redelivery of an already fulfilled job: what the dedupe costs when it fires (it absorbs the job). */
  duplicateP50: number;
  addedMs: number;
}

/** Fewer jobs per arm than this and the section is skipped. */
const MIN_JOBS = 10;

export async function run({ options, stack, progress }: SectionContext): Promise<JobDedupe | Skipped> {
  const { rows } = await stack.client.query<{ id: string }>(
    "select id::text as id from orders where status = 'paid' order by created_at limit $1",
    [2 * options.jobs],
  );
  const pairs = Math.floor(rows.length / 2);
  if (pairs < MIN_JOBS) return { skipped: `only ${rows.length} paid orders to fulfil` };
  const admin = createPrismaClient({ connectionString: stack.databaseUrl, max: 1 });
  const faults = await installFaultTriggers(admin);
  const deduped = await faults.session(stack.databaseUrl, {});
  const withoutDedupe = await faults.session(stack.databaseUrl, { receiptKindPerDelivery: true });
  const db = createPrismaClient({ connectionString: deduped.url, max: 2 });
  const control = createPrismaClient({ connectionString: withoutDedupe.url, max: 2 });
  const silent = { info: () => {}, error: () => {} };
  const first: number[] = [];
  const withoutDedupeMs: number[] = [];
  const duplicate: number[] = [];
  const timed = async (into: number[], job: () => Promise<unknown>) => {
    const started = performance.now();
    await job();
    into.push(performance.now() - started);
  };
  try {
    for (let i = 0; i < pairs; i += 1) {
      // Progress in fifths: a job takes milliseconds.
      if (i % Math.max(1, Math.floor(pairs / 5)) === 0)
        progress.run(Math.min(5, 1 + Math.floor((5 * i) / pairs)), 5);
      const dedupedOrder = rows[2 * i]?.id ?? '';
      const controlOrder = rows[2 * i + 1]?.id ?? '';
      const arms = [
        () => timed(first, () => fulfilOrder(db, dedupedOrder, { log: silent })),
        () => timed(withoutDedupeMs, () => fulfilOrder(control, controlOrder, { log: silent })),
      ];
      for (const arm of i % 2 === 0 ? arms : arms.reverse()) await arm();
      await timed(duplicate, () => fulfilOrder(db, dedupedOrder, { log: silent }));
    }
  } finally {
    await db.$disconnect();
    await control.$disconnect();
    await faults.drop();
    await admin.$disconnect();
  }
  const result = {
    jobs: pairs,
    firstP50: median(first),
    withoutDedupeP50: median(withoutDedupeMs),
    duplicateP50: median(duplicate),
    addedMs: median(first) - median(withoutDedupeMs),
  };
  log(
    `  fulfilment p50: first delivery ${result.firstP50.toFixed(2)} ms, without dedupe ${result.withoutDedupeP50.toFixed(2)} ms, duplicate delivery ${result.duplicateP50.toFixed(2)} ms (${pairs} jobs each)`,
  );
  return result;
}

export function figures(jobs: JobDedupe | Skipped): Figure[] {
  if ('skipped' in jobs) return [];
  return [
    figure({
      id: 'job-dedupe',
      label: 'worker fulfilment job, with / without its dedupe',
      // One run of `jobs` jobs per arm: the ratio of the arms' p50s, a single measurement.
      runs: [jobs.firstP50 / jobs.withoutDedupeP50],
      detail: `first delivery ${jobs.firstP50.toFixed(2)} / ${jobs.withoutDedupeP50.toFixed(2)} ms p50 (${jobs.addedMs >= 0 ? '+' : ''}${jobs.addedMs.toFixed(2)} ms per job); a duplicate delivery, absorbed: ${jobs.duplicateP50.toFixed(2)} ms (${jobs.jobs} jobs each)`,
    }),
  ];
}
