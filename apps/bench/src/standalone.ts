/**
 * How a standalone bench that measures several subjects side by side (bench:stores: stores, bench:queues:
 * brokers) picks them by name, ends, and fails: the results printed as a Markdown table and then as one JSON
 * line; a failure printed under the bench's name with exit code 1; every subject it opened closed whatever
 * happened.
 */
import { messageOf } from './repository.ts';

/** Something a bench opens and must close again: a store on a scratch database, a broker connection. */
export interface Closable {
  close(): Promise<void>;
}

/** What a bench's run hands back: its results, and the table they make. */
export interface BenchOutcome<TResult> {
  table: string;
  results: TResult[];
}

/**
 * Runs `measure` and prints its outcome; `cleanUp` runs last whatever happened (a failure of its own is thrown).
 * `bench` names the bench in the failure's line, e.g. `bench:stores`.
 */
export async function runStandalone<TResult>(
  bench: string,
  measure: () => Promise<BenchOutcome<TResult>>,
  cleanUp: () => Promise<void>,
): Promise<void> {
  try {
    const { table, results } = await measure();
    console.log('');
    console.log(table);
    console.log('');
    console.log(JSON.stringify(results));
  } catch (error) {
    console.error(`[${bench}] ${messageOf(error)}`);
    process.exitCode = 1;
  } finally {
    await cleanUp();
  }
}

/** The factory `id` names in `factories`; an unknown id throws, listing the known ones. `kind`: "store", "broker". */
export function factoryOf<TFactory>(factories: Record<string, TFactory>, kind: string, id: string): TFactory {
  const factory = factories[id];
  if (!factory) throw new Error(`unknown ${kind} ${id}: one of ${Object.keys(factories).join(', ')}`);
  return factory;
}

/** Closes each of `opened` in turn; a failure to close one is printed, and the next is still closed. */
export async function closeEach(opened: readonly Closable[]): Promise<void> {
  for (const subject of opened)
    await subject.close().catch((error: unknown) => console.error(messageOf(error)));
}
