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
import { createIdempotentConsumer, type QueueMessage } from '../src/consumer/index.ts';
import { resolveOptions } from '../src/core/config.ts';
import type { IdempotentRequest } from '../src/core/request.ts';
import { handleTransactional } from '../src/core/transactional.ts';
import { createReplayCache, fingerprintRequest, type StoredResponse } from '../src/index.ts';
import {
  createMariadbIdempotencyStore,
  type SqlExecutor,
  withTransactionFence,
} from '../src/mariadb/index.ts';
import { hasMariadbErrno } from '../src/mariadb/sql.ts';
import { deferred } from './support/db.ts';
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
 * A heavier transaction that makes the procedure's next statement a deadlock victim: once the procedure holds row
 * 1, `victimStatement(tx)` asks for row 2 while the other holds it and then asks for row 1; the procedure catches
 * its error (kept in `procedureCaught`), as a procedure that shrugs off a failed statement of its own would. Await
 * `other` afterwards.
 */
function deadlock() {
  const otherLocked = deferred<void>();
  const procedureWaiting = deferred<void>();
  const other = db.$transaction(
    async (tx) => {
      // Heavier than the procedure (more rows changed): InnoDB rolls the lighter one back.
      for (let i = 0; i < 30; i += 1) await tx.$executeRawUnsafe('INSERT INTO heavy (v) VALUES (1)');
      await tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 2');
      otherLocked.resolve();
      await procedureWaiting.promise;
      // Whichever of the two crossing requests reaches InnoDB first, the second closes the cycle, and InnoDB
      // rolls the lighter transaction (the procedure's: fewer rows changed) back. No wait decides it.
      await tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 1');
    },
    { timeout: 20_000, maxWait: 5_000 },
  );
  return {
    other,
    async victimStatement(tx: SqlExecutor) {
      await otherLocked.promise;
      const waiting = tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 2');
      procedureWaiting.resolve();
      try {
        await waiting;
      } catch (error) {
        procedureCaught = error;
      }
    },
  };
}

/** Runs `request` through transactional mode, its procedure made a deadlock victim when `withDeadlock`. */
async function runWithDeadlock(
  request: IdempotentRequest,
  withDeadlock: boolean,
  replayCache = createReplayCache({ rememberCommitted: true }),
  on: Store = store,
) {
  const options = resolveOptions({ replayCache, lockTimeoutMs: 5_000 });
  procedureCaught = undefined;
  const crossing = withDeadlock ? deadlock() : null;
  const handled = await handleTransactional(on, options, request, async (tx) => {
    await tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 1');
    await crossing?.victimStatement(tx);
    return { result: 'paid', response: output };
  });
  await crossing?.other;
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

describe('the consumer on MariaDB through Prisma: a deadlock victim its handler caught', () => {
  const message = (): QueueMessage => ({
    id: randomUUID(),
    type: 'order.pay',
    body: new TextEncoder().encode('{"orderId":"o-1"}'),
    deliveryCount: 1,
    headers: {},
  });
  const inboxRow = (received: QueueMessage) =>
    store.find({ scope: 'review2-consumer', procedure: received.type, key: received.id });

  function consumer(withDeadlock: boolean) {
    const crossing = { current: null as ReturnType<typeof deadlock> | null };
    const handle = createIdempotentConsumer<SqlExecutor, unknown>({
      store,
      name: 'review2-consumer',
      handler: async (_received, tx) => {
        await tx.$executeRawUnsafe('UPDATE dl SET v = v + 1 WHERE id = 1');
        if (withDeadlock) {
          crossing.current = deadlock();
          await crossing.current.victimStatement(tx);
        }
      },
    });
    return {
      handle: async (received: QueueMessage) => {
        procedureCaught = undefined;
        const decision = await handle.handle(received);
        await crossing.current?.other;
        return decision;
      },
    };
  }

  it('CONTROL: without the deadlock the message is acked executed and its inbox row stored', async () => {
    const received = message();
    expect(await consumer(false).handle(received)).toEqual({ action: 'ack', outcome: 'executed' });
    expect((await inboxRow(received))?.state).toBe('completed');
  });

  it('is not acked: its transaction committed nothing, so the message is retried, and a redelivery runs it', async () => {
    const received = message();
    const decision = await consumer(true).handle(received);
    expect(hasMariadbErrno(procedureCaught, 1213, /Deadlock found/i)).toBe(true);
    expect(decision.action).toBe('retry');
    expect(await inboxRow(received)).toBeNull();
    expect(await consumer(false).handle({ ...received, deliveryCount: 2 })).toEqual({
      action: 'ack',
      outcome: 'executed',
    });
  });
});
