/**
 * Review 2: `createReplayCache({ rememberCommitted: true })` on the real MariaDB. InnoDB rolls a deadlock
 * victim's WHOLE transaction back (the claim's row with it) and the session carries on outside any transaction;
 * a procedure that catches that error and answers a success still "completes": the completion's UPDATE matches
 * no row, the COMMIT commits nothing, and the request reports `executed`. The database holds no key (a retry
 * elsewhere runs the procedure again), yet this process would remember a response that was never committed and
 * answer every duplicate with it. CONTROL: the same request without the deadlock is stored. Also behind
 * withTransactionFence (the README’s MariaDB setup): the fence sees no COMMIT or ROLLBACK, the server ended it.
 */
import { randomUUID } from 'node:crypto';
import { createMariadbPrismaClient } from '@idem/mariadb-test-db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import type { IdempotentRequest } from '../src/core/request.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import { createReplayCache, fingerprintRequest, type StoredResponse } from '../src/index.ts';
import { createMariadbIdempotencyStore, withTransactionFence } from '../src/mariadb/index.ts';
import { hasMariadbErrno } from '../src/mariadb/sql.ts';
import { deferred, sleep } from './support/db.ts';
import { connectMariadbWithOwnTable, type MariadbWithOwnTable } from './support/mariadb.ts';

let mariadb: MariadbWithOwnTable;
let db: MariadbWithOwnTable['db'];
type Store = ReturnType<typeof createMariadbIdempotencyStore<MariadbWithOwnTable['db']>>;
let store: Store;
/** The README's setup: the adapter wrapped with `withTransactionFence`. */
let fencedDb: MariadbWithOwnTable['db'];
let fencedStore: Store;

beforeAll(async () => {
  mariadb = await connectMariadbWithOwnTable();
  db = mariadb.db;
  store = createMariadbIdempotencyStore(db);
  fencedDb = createMariadbPrismaClient(mariadb.scratch.url, 10, withTransactionFence);
  fencedStore = createMariadbIdempotencyStore(fencedDb);
  await mariadb.scratch.execute([
    'CREATE TABLE dl (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB',
    'INSERT INTO dl VALUES (1, 0), (2, 0)',
    'CREATE TABLE heavy (id INT PRIMARY KEY AUTO_INCREMENT, v INT NOT NULL) ENGINE=InnoDB',
  ]);
});
afterAll(async () => {
  await fencedDb.$disconnect();
  await mariadb.dispose();
});

/** The error the procedure of the last `runWithDeadlock` caught. */
let procedureCaught: unknown;

const output: StoredResponse = { kind: 'output', httpStatus: 200, body: '{"paid":true}' };

function newRequest(): IdempotentRequest {
  return {
    scope: `review2-${randomUUID()}`,
    procedure: 'pay',
    key: randomUUID(),
    fingerprint: fingerprintRequest('pay', { amount: 1 }),
  };
}

/**
 * Runs `request` with the procedure made a deadlock victim (when `deadlock`): it locks row 1, a heavier
 * transaction locks row 2, the procedure asks for row 2 and the other for row 1. The procedure catches its error.
 */
async function runWithDeadlock(
  request: IdempotentRequest,
  deadlock: boolean,
  replayCache = createReplayCache({ rememberCommitted: true }),
  on: Store = store,
) {
  const options = resolveOptions({ replayCache, lockTimeoutMs: 5_000 });
  procedureCaught = undefined;
  const otherLocked = deferred<void>();
  const procedureWaiting = deferred<void>();
  const other = deadlock
    ? db.$transaction(
        async (tx) => {
          // Heavier than the procedure (more rows changed): InnoDB rolls the lighter one back.
          for (let i = 0; i < 30; i += 1) await tx.$executeRawUnsafe('INSERT INTO heavy (v) VALUES (1)');
          await tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 2');
          otherLocked.resolve();
          await procedureWaiting.promise;
          await sleep(300);
          await tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 1');
        },
        { timeout: 20_000, maxWait: 5_000 },
      )
    : Promise.resolve();
  const handled = await handleTransactional(on, options, request, async (tx) => {
    await tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 1');
    if (deadlock) {
      await otherLocked.promise;
      const waiting = tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 2');
      procedureWaiting.resolve();
      try {
        await waiting;
      } catch (error) {
        // A procedure that shrugs off a failed statement of its own (logging it, say) and answers.
        procedureCaught = error;
      }
    }
    return { result: 'paid', response: output };
  });
  await other;
  return { handled, options, replayCache };
}

describe('rememberCommitted on MariaDB: a deadlock victim the procedure caught', () => {
  it('CONTROL: without the deadlock the key is stored and a duplicate replays it', async () => {
    const request = newRequest();
    const { handled } = await runWithDeadlock(request, false);
    expect(handled.kind).toBe('executed');
    expect((await store.find(request))?.response).toEqual(output);
  });

  it('nothing was committed: the request fails, and no duplicate is answered from memory', async () => {
    const request = newRequest();
    const attempt = runWithDeadlock(request, true);
    const failure = await attempt.then(
      ({ handled }) => ({ handled }),
      (error: unknown) => ({ error }),
    );
    // The procedure's second statement was the deadlock victim: InnoDB rolled its whole transaction back.
    expect(hasMariadbErrno(procedureCaught, 1213, /Deadlock found/i)).toBe(true);
    // The database holds no key: a duplicate reaching any other process runs the procedure again.
    expect(await store.find(request)).toBeNull();
    // So this request may not report a stored execution…
    expect(failure).toMatchObject({ error: { name: 'TransactionLostError' } });
    // …and this process may not answer a duplicate with the response that was never stored: it runs.
    let runs = 0;
    const options = resolveOptions({ replayCache: createReplayCache({ rememberCommitted: true }) });
    const duplicate = await handleTransactional(store, options, request, async () => {
      runs += 1;
      return { result: 'paid again', response: output };
    });
    expect(duplicate).toEqual({ kind: 'executed', result: 'paid again' });
    expect(runs).toBe(1);
  });

  it('the shared cache: a duplicate after the lost transaction is not replayed from memory', async () => {
    const request = newRequest();
    const replayCache = createReplayCache({ rememberCommitted: true });
    await runWithDeadlock(request, true, replayCache).catch(() => {});
    expect(hasMariadbErrno(procedureCaught, 1213, /Deadlock found/i)).toBe(true);
    expect(await store.find(request)).toBeNull();
    expect(replayCache.replay(request)).toBeUndefined();
    expect(replayCache.size).toBe(0);
  });

  it('the same behind withTransactionFence (the README’s setup): nothing stored, nothing replayed from memory', async () => {
    const request = newRequest();
    const replayCache = createReplayCache({ rememberCommitted: true });
    const failure = await runWithDeadlock(request, true, replayCache, fencedStore).then(
      ({ handled }) => ({ handled }),
      (error: unknown) => ({ error }),
    );
    expect(hasMariadbErrno(procedureCaught, 1213, /Deadlock found/i)).toBe(true);
    expect(await fencedStore.find(request)).toBeNull();
    expect(failure).toMatchObject({ error: { name: 'TransactionLostError' } });
    expect(replayCache.replay(request)).toBeUndefined();
  });
});
