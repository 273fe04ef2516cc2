/**
 * The transactional outbox (Postgres, through any Prisma 7 client): `enqueue(tx, message)` writes the message in
 * the transaction of the effect that produced it, so the message exists if and only if the effect committed.
 * The relay publishes unsent rows and marks them sent only after the broker confirmed them.
 *
 * The relay holds its batch's rows locked (`FOR UPDATE SKIP LOCKED`) in one transaction from the read to the mark:
 * relays side by side take different rows, and a relay that dies anywhere before its COMMIT leaves its rows
 * unsent — published again by the next relay. A message is therefore published at least once, and the
 * consumer's inbox (or JetStream's `Nats-Msg-Id` window) absorbs the second copy.
 */
import { randomUUID } from 'node:crypto';
import type { JsonValue } from '../core/record.ts';
import { quoteTable } from '../prisma/sql.ts';
import type { PrismaClientLike, SqlExecutor } from '../stores/prisma-client.ts';
import { DEFAULT_OUTBOX_TABLE } from './outbox-schema.ts';

/** A message to publish once its transaction commits. */
export interface OutboxMessage {
  /** The message id the consumer's inbox keys on. Default: a random UUID. */
  id?: string;
  /** The message type (RabbitMQ: the `type` property; JetStream: the `Idem-Message-Type` header). */
  type: string;
  /** Where to publish it: the routing key (RabbitMQ) or the subject (JetStream). */
  destination: string;
  /** Published as its JSON text (UTF-8). */
  body: JsonValue;
  headers?: Readonly<Record<string, string>>;
}

/** An outbox row, as the relay hands it to a publisher. */
export interface OutboxRecord {
  id: string;
  type: string;
  destination: string;
  /** The body's JSON text, exactly as enqueued: every publish of the row sends the same bytes. */
  body: string;
  headers: Readonly<Record<string, string>>;
}

/** Publishes a batch; resolves only when the broker has confirmed every message of it, rejects otherwise. */
export interface OutboxPublisher {
  publish(messages: readonly OutboxRecord[]): Promise<void>;
}

export interface OutboxOptions {
  /** The table (`outboxSchema(table)` has its DDL). Default `idempotency_outbox`. */
  table?: string;
}

export interface RelayOptions {
  /** Rows per transaction. Default 100. */
  batchSize?: number;
  /** The relay transaction's timeout: its publishes and confirms must fit in it. Default 30 000 ms. */
  transactionTimeoutMs?: number;
}

export interface StartRelayOptions extends RelayOptions {
  /** The pause after a pass that found nothing to publish (or failed). Default 250 ms. */
  idleMs?: number;
  /** A pass that failed (the broker or the database away): its rows stay unsent for the next pass. */
  onError?: (error: unknown) => void;
}

export interface OutboxRelay {
  /** Ends the loop after the pass in progress; resolves when it has ended. */
  stop(): Promise<void>;
}

export interface Outbox {
  /** Writes `message` through `tx`, the effect's transaction; resolves with its id. An id enqueued before is left as it is. */
  enqueue(tx: SqlExecutor, message: OutboxMessage): Promise<string>;
  /** One pass: publishes up to `batchSize` unsent rows, marks them sent after the confirms; resolves with how many. */
  relayBatch(publisher: OutboxPublisher, options?: RelayOptions): Promise<number>;
  /** Passes one after the other until `stop()`; a full batch is followed at once by the next. */
  startRelay(publisher: OutboxPublisher, options?: StartRelayOptions): OutboxRelay;
  /** Rows not yet sent. */
  countUnsent(): Promise<number>;
  /** Deletes up to `batchSize` rows sent more than `olderThanSeconds` ago; resolves with how many. */
  deleteSent(olderThanSeconds: number, batchSize?: number): Promise<number>;
}

interface Row {
  id: string;
  type: string;
  destination: string;
  body: string;
  headers: string | null;
}

export function createOutbox(db: PrismaClientLike, options: OutboxOptions = {}): Outbox {
  const table = quoteTable(options.table ?? DEFAULT_OUTBOX_TABLE);
  const insertSql = `insert into ${table} (id, type, destination, body, headers) values ($1, $2, $3, $4, $5)
    on conflict (id) do nothing`;
  const selectSql = `select id, type, destination, body, headers from ${table}
    where sent_at is null order by seq limit $1 for update skip locked`;
  const markSql = `update ${table} set sent_at = now() where id = any($1::text[])`;

  async function relayBatch(publisher: OutboxPublisher, relay: RelayOptions = {}): Promise<number> {
    const batchSize = relay.batchSize ?? 100;
    const timeout = relay.transactionTimeoutMs ?? 30_000;
    return db.$transaction(
      async (tx) => {
        const rows = await tx.$queryRawUnsafe<Row[]>(selectSql, batchSize);
        if (rows.length === 0) return 0;
        await publisher.publish(rows.map(toRecord));
        // Confirmed by the broker: only now is the row sent. A crash before this COMMIT publishes it again.
        await tx.$executeRawUnsafe(
          markSql,
          rows.map((row) => row.id),
        );
        return rows.length;
      },
      { maxWait: timeout, timeout },
    );
  }

  return {
    async enqueue(tx, message) {
      const id = message.id ?? randomUUID();
      await tx.$executeRawUnsafe(
        insertSql,
        id,
        message.type,
        message.destination,
        JSON.stringify(message.body),
        message.headers ? JSON.stringify(message.headers) : null,
      );
      return id;
    },

    relayBatch,

    startRelay(publisher, relay = {}) {
      const batchSize = relay.batchSize ?? 100;
      const idleMs = relay.idleMs ?? 250;
      let stopping = false;
      let wake: () => void = () => {};
      const loop = (async () => {
        while (!stopping) {
          let published = 0;
          try {
            published = await relayBatch(publisher, relay);
          } catch (error) {
            relay.onError?.(error);
          }
          if (published < batchSize && !stopping)
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, idleMs);
              wake = () => {
                clearTimeout(timer);
                resolve();
              };
            });
        }
      })();
      return {
        async stop() {
          stopping = true;
          wake();
          await loop;
        },
      };
    },

    async countUnsent() {
      const [row] = await db.$queryRawUnsafe<Array<{ n: number }>>(
        `select count(*)::int as n from ${table} where sent_at is null`,
      );
      return row?.n ?? 0;
    },

    async deleteSent(olderThanSeconds, batchSize = 1_000) {
      return db.$executeRawUnsafe(
        `delete from ${table} where seq in (
           select seq from ${table}
           where sent_at < now() - make_interval(secs => $1::double precision)
           order by sent_at limit $2)`,
        olderThanSeconds,
        batchSize,
      );
    },
  };
}

function toRecord(row: Row): OutboxRecord {
  return {
    id: row.id,
    type: row.type,
    destination: row.destination,
    body: row.body,
    headers: row.headers === null ? {} : (JSON.parse(row.headers) as Record<string, string>),
  };
}
