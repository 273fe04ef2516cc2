/**
 * Replay counts (core/replay-counts.ts): at most one count statement per key in flight, the replays that arrive
 * meanwhile carried by the next one, and the counts exact — on the real Postgres store through the handler, and
 * the failure and key-identity rules on a store the test holds.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import type { RecordKey } from '../src/core/record.ts';
import { countReplay } from '../src/core/replay-counts.ts';
import type { IdempotentRequest } from '../src/core/request.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import { fingerprintRequest, type IdempotencyStore, type StoredResponse } from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, deferred, uniqueScope } from './support/db.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

const options = resolveOptions();
const output: StoredResponse = { kind: 'output', httpStatus: 200, body: '"done"' };

function newRequest(): IdempotentRequest {
  return {
    scope: uniqueScope(),
    procedure: 'core.op',
    key: randomUUID(),
    fingerprint: fingerprintRequest('core.op', { n: 1 }),
  };
}

/** `store`'s count statements, watched: how many were sent, how many replays they carried, the most at once. */
function watched<TStore extends Pick<IdempotencyStore<unknown>, 'countReplay'>>(store: TStore) {
  const watch = { statements: 0, replays: 0, inFlight: 0, mostInFlight: 0 };
  const counting: TStore = {
    ...store,
    async countReplay(key: RecordKey, replays: number) {
      watch.statements += 1;
      watch.inFlight += 1;
      watch.mostInFlight = Math.max(watch.mostInFlight, watch.inFlight);
      try {
        await store.countReplay(key, replays);
        watch.replays += replays;
      } finally {
        watch.inFlight -= 1;
      }
    },
  };
  return { counting, watch };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('replay counts on the Postgres store', () => {
  it('50 replays of one key at once: replay_count is exactly 50, from one statement in flight at a time', async () => {
    const { counting, watch } = watched(createPrismaIdempotencyStore(db));
    const request = newRequest();
    const run = async () => ({ result: 'done', response: output });
    expect(await handleTransactional(counting, options, request, run)).toEqual({
      kind: 'executed',
      result: 'done',
    });

    const answers = await Promise.all(
      Array.from({ length: 50 }, () => handleTransactional(counting, options, request, run)),
    );
    expect(answers.every((answer) => answer.kind === 'replayed')).toBe(true);

    await expect.poll(async () => (await counting.find(request))?.replayCount, { timeout: 10_000 }).toBe(50);
    expect(watch.replays).toBe(50);
    expect(watch.mostInFlight).toBe(1);
    // Fifty replays that overlap share statements: far fewer than one each.
    expect(watch.statements).toBeLessThan(50);
  });
});

describe('replay counts, on a store the test holds', () => {
  /** A count store whose statements wait until the test lets them finish, or fail. */
  function heldStore() {
    const sent: Array<{ key: RecordKey; replays: number; finish: ReturnType<typeof deferred<void>> }> = [];
    const store = {
      countReplay(key: RecordKey, replays: number) {
        const finish = deferred();
        sent.push({ key, replays, finish });
        return finish.promise;
      },
    };
    return { store, sent };
  }
  const key = (scope: string, procedure = 'p', k = 'k'): RecordKey => ({ scope, procedure, key: k });

  it('replays that arrive while a statement is in flight go out together in the next one', async () => {
    const { store, sent } = heldStore();
    countReplay(store, key('a'));
    await settle();
    for (let i = 0; i < 9; i += 1) countReplay(store, key('a'));
    await settle();
    expect(sent.map((s) => s.replays)).toEqual([1]);

    sent[0]?.finish.resolve();
    await settle();
    expect(sent.map((s) => s.replays)).toEqual([1, 9]);
    sent[1]?.finish.resolve();
    await settle();
    // Nothing waiting: the key is forgotten, and its next replay is a statement of its own.
    countReplay(store, key('a'));
    await settle();
    expect(sent.map((s) => s.replays)).toEqual([1, 9, 1]);
  });

  it('a failed statement loses only its own replays: the ones that waited for it still go out', async () => {
    const { store, sent } = heldStore();
    countReplay(store, key('a'));
    await settle();
    countReplay(store, key('a'));
    countReplay(store, key('a'));
    sent[0]?.finish.reject(new Error('connection lost'));
    await settle();
    await settle();
    expect(sent.map((s) => s.replays)).toEqual([1, 2]);
  });

  it('a store that throws instead of rejecting does not stop the key being counted later', async () => {
    let calls = 0;
    const store = {
      countReplay(): Promise<void> {
        calls += 1;
        throw new Error('synchronous failure');
      },
    };
    countReplay(store, key('a'));
    await settle();
    countReplay(store, key('a'));
    await settle();
    expect(calls).toBe(2);
  });

  it('keys are told apart by all three parts, whatever characters they hold', async () => {
    const { store, sent } = heldStore();
    // Joined with a separator these two would be one key: "a|b" + "c" and "a" + "b|c".
    countReplay(store, key('a|b', 'c'));
    countReplay(store, key('a', 'b|c'));
    countReplay(store, key('a', 'b|c', 'other'));
    await settle();
    expect(sent.map((s) => [s.key, s.replays])).toEqual([
      [key('a|b', 'c'), 1],
      [key('a', 'b|c'), 1],
      [key('a', 'b|c', 'other'), 1],
    ]);
  });

  it('two stores count apart, even for the same key', async () => {
    const first = heldStore();
    const second = heldStore();
    countReplay(first.store, key('a'));
    countReplay(second.store, key('a'));
    await settle();
    expect([first.sent.length, second.sent.length]).toEqual([1, 1]);
  });
});
