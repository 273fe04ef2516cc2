/**
 * Review: the pooled executor (stores/pooled-executor.ts) on a scripted driver — every connection it takes goes
 * back exactly once, whatever fails: a BEGIN that fails, a callback that throws synchronously, a ROLLBACK that
 * fails (closed, not handed back), a connection that arrives after maxWait, a timeout while a statement is in
 * flight (the ROLLBACK goes after it, and the callback's next statement is refused).
 */
import { describe, expect, it } from 'vitest';
import { type PooledDriver, pooledExecutor } from '../src/stores/pooled-executor.ts';
import { TransactionClosedError } from '../src/stores/transaction-fence.ts';
import { deferred } from './support/db.ts';

interface Connection {
  id: number;
}

function scripted(fail: { begin?: boolean; rollback?: boolean; connectAfterMs?: number } = {}) {
  const log: string[] = [];
  const released: Array<{ id: number; destroy: boolean }> = [];
  let next = 0;
  let slow: Promise<void> | undefined;
  const driver: PooledDriver<Connection> = {
    async query(on, sql) {
      log.push(`${on ? on.id : 'pool'}:${sql}`);
      if (sql === 'SLOW' && slow) await slow;
      return [];
    },
    async execute(on, sql) {
      log.push(`${on ? on.id : 'pool'}:${sql}`);
      if (sql === 'BEGIN' && fail.begin) throw new Error('BEGIN failed');
      if (sql === 'ROLLBACK' && fail.rollback) throw new Error('ROLLBACK failed');
      return 0;
    },
    async connect() {
      const connection = { id: ++next };
      if (fail.connectAfterMs) await new Promise((resolve) => setTimeout(resolve, fail.connectAfterMs));
      return connection;
    },
    release(connection, destroy) {
      released.push({ id: connection.id, destroy });
    },
    timeoutError: (message) => new Error(message),
  };
  return {
    driver,
    log,
    released,
    slowUntil(gate: Promise<void>) {
      slow = gate;
    },
  };
}

describe('the pooled executor gives every connection back once', () => {
  it('a BEGIN that fails: the connection is rolled back and released, the error is the BEGIN’s', async () => {
    const { driver, released, log } = scripted({ begin: true });
    let ran = false;
    await expect(
      pooledExecutor(driver).$transaction(async () => {
        ran = true;
      }),
    ).rejects.toThrow('BEGIN failed');
    expect(ran).toBe(false);
    expect(log).toEqual(['1:BEGIN', '1:ROLLBACK']);
    expect(released).toEqual([{ id: 1, destroy: false }]);
  });

  it('a callback that throws synchronously: ROLLBACK, released once', async () => {
    const { driver, released, log } = scripted();
    await expect(
      pooledExecutor(driver).$transaction((() => {
        throw new Error('sync');
      }) as never),
    ).rejects.toThrow('sync');
    expect(log).toEqual(['1:BEGIN', '1:ROLLBACK']);
    expect(released).toEqual([{ id: 1, destroy: false }]);
  });

  it('a ROLLBACK that fails: the connection is destroyed, not handed back', async () => {
    const { driver, released } = scripted({ rollback: true });
    await expect(
      pooledExecutor(driver).$transaction(async () => {
        throw new Error('callback');
      }),
    ).rejects.toThrow('callback');
    expect(released).toEqual([{ id: 1, destroy: true }]);
  });

  it('a connection that arrives after maxWait goes straight back, unused', async () => {
    const { driver, released, log } = scripted({ connectAfterMs: 60 });
    await expect(pooledExecutor(driver).$transaction(async () => {}, { maxWait: 10 })).rejects.toThrow(
      /maxWait/,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(log).toEqual([]);
    expect(released).toEqual([{ id: 1, destroy: false }]);
  });

  it('past its timeout with a statement in flight: ROLLBACK after it, the next statement refused, released once', async () => {
    const { driver, released, log, slowUntil } = scripted();
    const gate = deferred<void>();
    slowUntil(gate.promise);
    let next: unknown;
    const callbackDone = deferred<void>();
    const transaction = pooledExecutor(driver).$transaction(
      async (tx) => {
        const on = tx as unknown as { $queryRawUnsafe(sql: string): Promise<unknown> };
        await on.$queryRawUnsafe('SLOW');
        next = await on.$queryRawUnsafe('NEXT').catch((error: unknown) => error);
        callbackDone.resolve();
      },
      { timeout: 20 },
    );
    await expect(transaction).rejects.toThrow(/timeout/);
    gate.resolve();
    await callbackDone.promise;
    expect(next).toBeInstanceOf(TransactionClosedError);
    expect(log).toEqual(['1:BEGIN', '1:SLOW', '1:ROLLBACK']);
    expect(released).toEqual([{ id: 1, destroy: false }]);
  });

  it('timeout and maxWait of Infinity (or past 2^31 − 1 ms) mean no bound, not 1 ms', async () => {
    const { driver, released } = scripted({ connectAfterMs: 20 });
    const result = await pooledExecutor(driver).$transaction(
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 30));
        return 'committed';
      },
      { maxWait: Number.POSITIVE_INFINITY, timeout: 3_000_000_000 },
    );
    expect(result).toBe('committed');
    expect(released).toEqual([{ id: 1, destroy: false }]);
  });
});
