/**
 * `pnpm --filter @idem/bench bench:replay-burst`: what a burst of duplicates of one key costs. In one process
 * (createCaller, the fast path, a pool of 10): 50 requests at once on a fresh key (one execution, 49
 * duplicates), then 50 replays of that finished key, each burst timed as a whole; BENCH_BURST_ROUNDS rounds,
 * the arms alternating. Arms, all on the same store, database and pool:
 * - as the library runs it: the duplicates of a request running here wait for it in memory
 *   (core/running-here.ts), and replay counts go out one statement per key at a time (core/replay-counts.ts);
 * - every request of the burst on a store object of its own (the same store, spread into 50 objects): no
 *   request finds another running, so every duplicate waits on the key's row in the database, holding a pool
 *   connection, and counts its replay with a statement of its own — how bursts ran before both;
 * - as the library runs it, with no replay count at all (the floor of the counts).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createPrismaClient, pgAdapter } from '@idem/db';
import { createPrismaIdempotencyStore, withIdempotencyFastPath } from '@idem/idempotency/prisma';
import { intKnob } from '../knobs.ts';
import { p50 } from '../stats.ts';
import { benchCaller, withKey } from './bench-caller.ts';
import { createProfileDatabase } from './profile-database.ts';

const BURST = intKnob(process.env, 'BENCH_BURST', 50);
const ROUNDS = intKnob(process.env, 'BENCH_BURST_ROUNDS', 40);

async function main() {
  const { url: databaseUrl, drop } = await createProfileDatabase('idem_burst');
  const adapter = withIdempotencyFastPath(pgAdapter({ connectionString: databaseUrl, max: 10 }));
  const db = createPrismaClient({ adapter });
  try {
    const store = createPrismaIdempotencyStore(db, { fastPath: adapter });
    const callerOn = (own: typeof store) => benchCaller(db, { store: own, getScope: () => 'burst' });
    // Each arm: the caller for the i-th request of a burst.
    const shared = callerOn(store);
    const apart = Array.from({ length: BURST }, () => callerOn({ ...store }));
    const uncounted = callerOn({ ...store, countReplay: async () => {} });
    const arms: Record<string, (i: number) => typeof shared> = {
      'as the library runs it': () => shared,
      'each request on a store object of its own (before)': (i) => apart[i] ?? shared,
      'no replay count': () => uncounted,
    };
    const times = new Map<string, { fresh: number[]; replays: number[] }>();
    for (const arm of Object.keys(arms)) times.set(arm, { fresh: [], replays: [] });
    for (let round = 0; round < ROUNDS; round += 1) {
      const order = round % 2 === 0 ? Object.keys(arms) : Object.keys(arms).reverse();
      for (const arm of order) {
        const call = arms[arm];
        const record = times.get(arm);
        if (!call || !record) continue;
        // 50 at once on a fresh key (1 execution, 49 duplicates), then 50 replays of that finished key.
        const key = randomUUID();
        let t0 = performance.now();
        await Promise.all(
          Array.from({ length: BURST }, (_, i) =>
            call(i)(withKey(key))
              .protected({ n: 1 })
              .catch(() => null),
          ),
        );
        record.fresh.push(performance.now() - t0);
        await new Promise((resolve) => setTimeout(resolve, 50));
        t0 = performance.now();
        await Promise.all(Array.from({ length: BURST }, (_, i) => call(i)(withKey(key)).protected({ n: 1 })));
        record.replays.push(performance.now() - t0);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    for (const [arm, { fresh, replays }] of times)
      console.log(
        `${arm}: same-key burst p50 ${p50(fresh).toFixed(2)} ms, replay burst p50 ${p50(replays).toFixed(2)} ms`,
      );
  } finally {
    await db.$disconnect();
    await drop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
