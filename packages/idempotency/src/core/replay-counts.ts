/**
 * Replay statistics that never queue on a hot key. Every replay adds one to its key's `replay_count`, an
 * UPDATE of the key's row; one UPDATE per replay would make fifty replays of one key at once wait on that row's
 * lock in turn, each holding a pool connection the next requests need (docs/BENCHMARKS.md, "Replay counts").
 * So at most one count statement per key is in flight from a process; replays of the key that arrive meanwhile
 * add to a tally that the next statement carries. The counts stay exact, except that a count whose statement
 * fails is lost (statistics only); the request never waits for any of it.
 */
import { mapPerStore } from './per-store.ts';
import { type RecordKey, recordKeyId } from './record.ts';
import type { IdempotencyStore } from './store.ts';

interface Tally {
  /** Replays of the key that arrived while its statement was in flight. */
  waiting: number;
}

/** Per store: the keys with a count statement in flight. */
const inFlightIn = mapPerStore<Tally>();

/** Counts one replay of `key` on `store`, in the background. */
export function countReplay(store: Pick<IdempotencyStore<unknown>, 'countReplay'>, key: RecordKey): void {
  const inFlight = inFlightIn(store);
  const id = recordKeyId(key);
  const tally = inFlight.get(id);
  if (tally) tally.waiting += 1;
  else send(store, inFlight, id, { scope: key.scope, procedure: key.procedure, key: key.key }, 1);
}

function send(
  store: Pick<IdempotencyStore<unknown>, 'countReplay'>,
  inFlight: Map<string, Tally>,
  id: string,
  key: RecordKey,
  replays: number,
): void {
  const tally: Tally = { waiting: 0 };
  inFlight.set(id, tally);
  const settled = () => {
    if (tally.waiting > 0) send(store, inFlight, id, key, tally.waiting);
    else inFlight.delete(id);
  };
  // A store that throws synchronously is treated like one whose statement failed.
  Promise.resolve()
    .then(() => store.countReplay(key, replays))
    .then(settled, settled);
}
