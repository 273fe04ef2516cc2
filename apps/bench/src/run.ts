/**
 * `pnpm bench`: every figure of issue 14's table in one run — what the idempotency middleware costs against the
 * unprotected path (P1, P2, P3, P5, P2 against connections, the checkout's placeOrder, the worker's job dedupe,
 * the pgbench floor), the peers on the same handler (the peers ratio, P4), the client bundle (P7) and the storage
 * section (P6, growth).
 *
 * Builds nothing: run `pnpm build` first. Starts the stack (stack.ts: a scratch database, the provider, the app's
 * test server), runs the sections in order (sections/, one file each, printing the time left as it goes), then
 * writes the report (report.ts). Every figure is the median of `runs` runs, protected and unprotected
 * interleaved in each. Knobs (environment variables; BENCH_QUICK=1 for the shortest run): options.ts.
 */
import os from 'node:os';
import { log } from './log.ts';
import { parseBenchOptions } from './options.ts';
import { createProgress } from './progress.ts';
import { writeReport } from './report.ts';
import { messageOf } from './repository.ts';
import * as checkout from './sections/checkout.ts';
import type { SectionContext } from './sections/context.ts';
import * as jobDedupe from './sections/job-dedupe.ts';
import * as curve from './sections/p2-curve.ts';
import * as clientSize from './sections/p7-client-size.ts';
import * as peers from './sections/peers.ts';
import * as pgbenchFloor from './sections/pgbench-floor.ts';
import * as runs from './sections/runs.ts';
import * as storage from './sections/storage.ts';
import { startStack, stopOnSignals } from './stack.ts';
import { Teardown } from './teardown.ts';

/**
 * The sections in the order main() runs them, for the plan of the time left. Storage is last: its WAL would slow
 * whatever ran after it.
 */
const SECTIONS = [runs, curve, checkout, jobDedupe, pgbenchFloor, peers, clientSize, storage];

async function main(teardown: Teardown): Promise<void> {
  const options = parseBenchOptions();
  const loadAtStart = os.loadavg()[0] ?? Number.NaN;
  const stack = await startStack(options, teardown);
  const progress = createProgress(
    SECTIONS.map((section) => ({ name: section.name, seconds: section.plannedSeconds(options) })),
    log,
  );
  const context: SectionContext = { options, stack, progress };
  const next = <T>(section: { name: string; run(context: SectionContext): T }): T => {
    progress.section(section.name);
    return section.run(context);
  };

  const results = {
    runs: await next(runs),
    curve: await next(curve),
    // Pays for the orders the job dedupe section fulfils.
    checkout: await next(checkout),
    jobs: await next(jobDedupe),
    floor: await next(pgbenchFloor),
    peers: await next(peers),
    clientSize: next(clientSize),
    storage: await next(storage),
  };
  writeReport(results, options, { postgresVersion: stack.postgresVersion, loadAtStart });
}

const teardown = new Teardown('[bench] cleanup');
stopOnSignals(teardown);
main(teardown)
  .catch((error) => {
    console.error(`[bench] ${messageOf(error)}`);
    process.exitCode = 1;
  })
  .finally(() => teardown.run());
