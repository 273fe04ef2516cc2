/**
 * Fulfilment on a broker (QUEUE_URL): the worker relays the outbox to the broker and consumes the fulfilment
 * messages through an inbox — the message id claimed in the same transaction as the shipment and the receipt
 * (`fulfilOrderIn`), acknowledged after the commit. pg-boss keeps the scheduled jobs (cleanup, reconciler).
 */
import {
  type Broker,
  brokerNames,
  connectBroker,
  FulfilmentMessage,
  type FulfilmentOutbox,
  fulfilmentOutbox,
} from '@idem/broker';
import type { Database, Prisma } from '@idem/db';
import { createIdempotentConsumer, type OutboxRelay } from '@idem/idempotency/consumer';
import { createPrismaIdempotencyStore, type PrismaTransactionLike } from '@idem/idempotency/prisma';
import { type FulfilmentJob, fulfilmentJobSchema } from '@idem/jobs';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Logger } from '../log.ts';
import { fulfilOrderIn } from './fulfilment.ts';

const tracer = trace.getTracer('@idem/worker');

export interface BrokerFulfilmentOptions {
  /** amqp://… (RabbitMQ) or nats://… (NATS JetStream). */
  url: string;
  /** Prefix of every queue, stream and subject (default `idem`). */
  namespace?: string;
  /** Messages handled at once. */
  concurrency: number;
  /** Deliveries of a message whose handling keeps failing before it is dead-lettered. Default 10. */
  maxDeliveries?: number;
  /** A failed delivery's first retry delay (doubling up to 60 s). Default 1 000 ms. */
  retryDelayMs?: number;
  log: Logger;
}

export interface BrokerFulfilment {
  broker: Broker;
  messages: FulfilmentOutbox;
  /** The reconciler's and the stranded-paid sweep's way to queue fulfilment: a message in the outbox. */
  enqueueFulfilment(orderId: string, tx: Prisma.TransactionClient): Promise<void>;
  fulfilmentJobStates(orderId: string): Promise<string[]>;
  /** Stops relaying and consuming, waits for the messages being handled, closes the broker connection. */
  stop(): Promise<void>;
}

const RELAY_ERROR_LOG_EVERY_MS = 30_000;

export async function startBrokerFulfilment(
  db: Database,
  options: BrokerFulfilmentOptions,
): Promise<BrokerFulfilment> {
  const { log } = options;
  const broker = await connectBroker(options.url, brokerNames(options.namespace), {
    info: (line) => log.info(line),
    warn: (line, error) => log.error(line, error),
  });
  const messages = fulfilmentOutbox(db);
  const consumer = createIdempotentConsumer<PrismaTransactionLike<Database>, FulfilmentJob>({
    store: createPrismaIdempotencyStore<Database>(db),
    name: FulfilmentMessage.consumer,
    maxDeliveries: options.maxDeliveries ?? 10,
    backoff: { initialMs: options.retryDelayMs ?? 1_000 },
    decode: (body) => fulfilmentJobSchema.parse(JSON.parse(Buffer.from(body).toString('utf8'))),
    handler: ({ id, body, deliveryCount }, tx) =>
      tracer.startActiveSpan(
        'fulfilment',
        { kind: SpanKind.CONSUMER },
        propagation.extract(context.active(), body),
        async (span) => {
          span.setAttribute('messaging.message.id', id);
          try {
            await fulfilOrderIn(tx, body.orderId, { log });
          } catch (error) {
            span.setStatus({ code: SpanStatusCode.ERROR });
            log.error(
              `fulfilment ${body.orderId} (message ${id}, delivery ${deliveryCount}) failed; will retry`,
              error,
            );
            throw error;
          } finally {
            span.end();
          }
        },
      ),
    onEvent: (event) => {
      if (event.outcome === 'duplicate')
        log.info(`fulfilment message ${event.id}: a duplicate, acknowledged`);
      if (event.outcome === 'dead-letter')
        log.error(
          `fulfilment message ${event.id}: dead-lettered (${event.reason}) after ${event.deliveryCount} deliveries`,
        );
    },
  });

  let relay: OutboxRelay | undefined;
  try {
    await broker.subscribeFulfilment(consumer, { concurrency: options.concurrency });
    let lastRelayErrorAt = Number.NEGATIVE_INFINITY;
    relay = messages.outbox.startRelay(broker.publisher, {
      onError: (error) => {
        // The broker or the database away: every pass fails until it is back; one line per 30 s is enough.
        if (Date.now() - lastRelayErrorAt < RELAY_ERROR_LOG_EVERY_MS) return;
        lastRelayErrorAt = Date.now();
        log.error(
          'outbox relay: a pass failed; its messages stay unsent and are published on a later pass',
          error,
        );
      },
    });
  } catch (error) {
    await broker.close().catch(() => {});
    throw error;
  }
  const running = relay;

  return {
    broker,
    messages,
    async enqueueFulfilment(orderId, tx) {
      await messages.enqueue(orderId, tx);
    },
    fulfilmentJobStates: (orderId) => messages.states(orderId),
    async stop() {
      await running.stop();
      await broker.close();
    },
  };
}
