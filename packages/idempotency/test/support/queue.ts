/**
 * What the consumer and broker tests share: an effects table with no unique key (so that every execution of a
 * handler leaves a row, and a duplicate shows), the CONTROL consumer (the same handler in a transaction of its
 * own, no inbox, no delivery limit), and a record of every decision a consumer made.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import type { ConsumerDecision, MessageConsumer, QueueMessage } from '../../src/consumer/index.ts';
import type { PrismaTransactionLike, SqlExecutor } from '../../src/prisma/index.ts';

export type Tx = PrismaTransactionLike<Database>;

/** The test's effect: one row per execution. */
export const EFFECTS_DDL = `create table if not exists effects (
  seq bigserial primary key, consumer text not null, message_id text not null, body text not null)`;

export async function recordEffect(
  tx: SqlExecutor,
  consumer: string,
  message: QueueMessage | { id: string; body: unknown },
) {
  const body =
    message.body instanceof Uint8Array
      ? Buffer.from(message.body).toString('utf8')
      : JSON.stringify(message.body);
  await tx.$executeRawUnsafe(
    'insert into effects (consumer, message_id, body) values ($1, $2, $3)',
    consumer,
    message.id,
    body,
  );
}

/** Effects per message id of `consumer`. */
export async function effectsOf(db: SqlExecutor, consumer: string): Promise<Map<string, number>> {
  const rows = await db.$queryRawUnsafe<Array<{ message_id: string; n: number }>>(
    'select message_id, count(*)::int as n from effects where consumer = $1 group by message_id',
    consumer,
  );
  return new Map(rows.map((row) => [row.message_id, row.n]));
}

export async function effectCount(db: SqlExecutor, consumer: string): Promise<number> {
  const [row] = await db.$queryRawUnsafe<Array<{ n: number }>>(
    'select count(*)::int as n from effects where consumer = $1',
    consumer,
  );
  return row?.n ?? 0;
}

/**
 * The CONTROL: the handler in a transaction of its own, no inbox, no delivery limit — every delivery runs it,
 * and a failure is retried for ever.
 */
export function plainConsumer(
  db: Database,
  handler: (message: QueueMessage, tx: Tx) => Promise<void>,
  retryDelayMs = 1,
): MessageConsumer {
  return {
    async handle(message) {
      try {
        await db.$transaction((tx) => handler(message, tx));
        return { action: 'ack', outcome: 'executed' };
      } catch (error) {
        return { action: 'retry', delayMs: retryDelayMs, error };
      }
    },
  };
}

export interface Decided {
  message: QueueMessage;
  decision: ConsumerDecision;
}

/** `consumer`, with every delivery and decision recorded in `log`. */
export function recording(consumer: MessageConsumer, log: Decided[]): MessageConsumer {
  return {
    async handle(message) {
      const decision = await consumer.handle(message);
      log.push({ message, decision });
      return decision;
    },
  };
}

export const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

export const json = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8');
