/** Pure parts of @idem/jobs: names, payload schema, settings from the environment, the Prisma adapter. */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  enqueueFulfilment,
  fulfilmentJobSchema,
  fulfilmentQueueOptions,
  fulfilmentSettingsFromEnv,
  type PgBoss,
  prismaTransactionDb,
  Queue,
  type RawQueryable,
} from '../src/index.ts';

describe('Queue and the fulfilment payload', () => {
  it('names the queues', () => {
    expect(Queue).toEqual({
      fulfilment: 'fulfilment',
      cleanup: 'idem-cleanup',
      reconcile: 'payments-reconcile',
    });
  });

  it('accepts { orderId: uuid } only', () => {
    const orderId = randomUUID();
    expect(fulfilmentJobSchema.parse({ orderId })).toEqual({ orderId });
    expect(fulfilmentJobSchema.safeParse({ orderId: 'order-42' }).success).toBe(false);
    expect(fulfilmentJobSchema.safeParse({}).success).toBe(false);
  });

  it('enqueueFulfilment validates before it sends anything', async () => {
    const boss = {
      send: () => {
        throw new Error('must not be called');
      },
    } as unknown as PgBoss;
    await expect(enqueueFulfilment(boss, 'not-a-uuid')).rejects.toThrow(/uuid/i);
  });
});

describe('fulfilment queue settings', () => {
  it('defaults: 30 s expiry, 10 retries, 2 s backoff base', () => {
    expect(fulfilmentSettingsFromEnv({})).toEqual({
      expireInSeconds: 30,
      retryLimit: 10,
      retryDelaySeconds: 2,
    });
  });

  it('reads the environment; an empty variable counts as unset', () => {
    expect(
      fulfilmentSettingsFromEnv({
        FULFILMENT_EXPIRE_SECONDS: '5',
        FULFILMENT_RETRY_LIMIT: '0',
        FULFILMENT_RETRY_DELAY_SECONDS: '',
      }),
    ).toEqual({ expireInSeconds: 5, retryLimit: 0, retryDelaySeconds: 2 });
  });

  it('names the variable that is wrong', () => {
    expect(() => fulfilmentSettingsFromEnv({ FULFILMENT_EXPIRE_SECONDS: '0' })).toThrow(
      /FULFILMENT_EXPIRE_SECONDS: Too small/,
    );
    expect(() => fulfilmentSettingsFromEnv({ FULFILMENT_RETRY_LIMIT: 'many' })).toThrow(
      /FULFILMENT_RETRY_LIMIT/,
    );
  });

  it('maps to pg-boss queue options: standard policy, exponential backoff', () => {
    expect(fulfilmentQueueOptions({ expireInSeconds: 30, retryLimit: 10, retryDelaySeconds: 2 })).toEqual({
      policy: 'standard',
      expireInSeconds: 30,
      retryLimit: 10,
      retryDelay: 2,
      retryBackoff: true,
    });
  });
});

describe('prismaTransactionDb', () => {
  function fakeTx(rows: unknown[]) {
    const calls: Array<{ query: string; values: unknown[] }> = [];
    const tx: RawQueryable = {
      $queryRawUnsafe: async <T>(query: string, ...values: unknown[]) => {
        calls.push({ query, values });
        return rows as T;
      },
    };
    return { tx, calls };
  }

  it('runs pg-boss’s SQL on the transaction and returns { rows }', async () => {
    const { tx, calls } = fakeTx([{ id: 'job-1' }]);
    const result = await prismaTransactionDb(tx).executeSql('insert … returning id', ['fulfilment', 3, null]);
    expect(result).toEqual({ rows: [{ id: 'job-1' }] });
    expect(calls).toEqual([{ query: 'insert … returning id', values: ['fulfilment', 3, null] }]);
  });

  it('sends an object parameter as JSON and leaves arrays, dates, undefined→null alone', async () => {
    const { tx, calls } = fakeTx([]);
    const when = new Date();
    await prismaTransactionDb(tx).executeSql('…', [{ orderId: 'x' }, ['a', 'b'], when, undefined]);
    expect(calls[0]?.values).toEqual(['{"orderId":"x"}', ['a', 'b'], when, null]);
  });
});
