/**
 * One mid-stream fault, the same for every broker and fault (consumer-restart-*.test.ts,
 * consumer-network-cut.test.ts): a producer publishes N ids while the protected consumer (the inbox) and its
 * CONTROL (no inbox) drain copies of the same messages; each holds 5 deliveries after their commit, before the
 * ack (`holdingAfterCommit`); the fault is injected once both hold theirs; once both consumers have seen their
 * connection drop, the broker or the link comes back, the held deliveries are let go only after the broker has
 * delivered each of them again (so their acks are certainly too late), the producer publishes the rest, and the
 * run waits until the broker has nothing left to deliver.
 *
 * A rig is one broker's side of it. JetStream: the client (`@nats-io/transport-node`) reconnects by itself and
 * `consume()` pulls again after a reconnect; an ack given while disconnected may be buffered and sent once the
 * client is back (seen in a CI run: no redelivery when the reconnection beat AckWait), which is why the held
 * deliveries wait for their redelivery. RabbitMQ: amqplib does not reconnect, and
 * neither does the adapter (it is handed a channel), so the rig does what an application must: on the
 * connection's `close`, connect again, open a channel, consume again; an ack on the dead channel throws (the
 * adapter's `onError`), and the broker requeues what the dead connection held unacknowledged.
 */

import type { Database } from '@idem/db';
import { AckPolicy, jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect, headers, nanos } from '@nats-io/transport-node';
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { expect } from 'vitest';
import type { MessageConsumer } from '../../src/consumer/index.ts';
import { consumeJetStream, MESSAGE_TYPE_HEADER } from '../../src/consumer/jetstream/index.ts';
import { consumeRabbitMq } from '../../src/consumer/rabbitmq/index.ts';
import { deferred, sleep } from './db.ts';
import { holdingAfterCommit } from './faults.ts';
import { type Decided, effectCount, effectsOf, json, recording, unique } from './queue.ts';

export type Side = 'protected' | 'control';

/** A consumer the rig started: how often its connection dropped, and how many acks failed on a dead one. */
export interface Running {
  disconnects(): number;
  ackErrors(): number;
}

export interface FaultRig {
  /** Consumes `side`'s copy of the messages with `consumer`. */
  consume(side: Side, consumer: MessageConsumer): Promise<Running>;
  /** Publishes each id (body `{ id }`), again after a failure until the broker confirms it; resolves with the retries. */
  publish(ids: readonly string[]): Promise<number>;
  /**
   * What the broker still holds per side: JetStream, undelivered + unacknowledged (`num_pending` +
   * `num_ack_pending`); RabbitMQ, ready messages (AMQP does not count the unacknowledged). `null`: unknown (the
   * broker did not answer).
   */
  pending(): Promise<Record<Side, number | null>>;
  /** Stops the consumers and closes every connection. */
  close(): Promise<void>;
}

const reconnecting = {
  maxReconnectAttempts: -1,
  reconnectTimeWait: 100,
  reconnectJitter: 50,
  ignoreClusterUpdates: true,
} as const;

/**
 * JetStream: a file-storage stream with a durable pull consumer per side (AckWait `ackWaitMs`); consumers connect
 * to `consumerServers` (the broker, or a proxy before it), the producer and the admin to `servers`.
 */
export async function jetStreamRig(options: {
  servers: string;
  consumerServers: string;
  ackWaitMs: number;
}): Promise<FaultRig> {
  const admin = await connect({ servers: options.servers, ...reconnecting });
  const jsm = await jetstreamManager(admin);
  const name = unique('idem_fault').replace('-', '_');
  const subject = `${name}.orders`;
  await jsm.streams.add({
    name,
    subjects: [`${name}.>`],
    storage: StorageType.File,
    duplicate_window: nanos(120_000),
  });
  for (const durable of ['protected', 'control'])
    await jsm.consumers.add(name, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(options.ackWaitMs),
      filter_subject: subject,
    });
  const closers: Array<() => Promise<unknown>> = [];
  const js = jetstream(admin);
  return {
    async consume(side, consumer) {
      const nc = await connect({ servers: options.consumerServers, ...reconnecting });
      let disconnects = 0;
      let ackErrors = 0;
      void (async () => {
        for await (const status of nc.status()) if (status.type === 'disconnect') disconnects += 1;
      })();
      const messages = await (await jetstream(nc).consumers.get(name, side)).consume({ max_messages: 10 });
      const loop = consumeJetStream({
        messages,
        consumer,
        onError: () => {
          ackErrors += 1;
        },
      });
      loop.catch(() => {});
      closers.push(async () => {
        await messages.close().catch(() => {});
        await loop.catch(() => {});
        await nc.close().catch(() => {});
      });
      return { disconnects: () => disconnects, ackErrors: () => ackErrors };
    },
    async publish(ids) {
      let retries = 0;
      for (const id of ids)
        for (;;) {
          const set = headers();
          set.set(MESSAGE_TYPE_HEADER, 'order.ship');
          try {
            // Nats-Msg-Id: a retry of a publish that was stored but whose PubAck was lost is dropped as a duplicate.
            await js.publish(subject, json({ id }), { msgID: id, headers: set, timeout: 1_000 });
            break;
          } catch {
            retries += 1;
            await sleep(50);
          }
        }
      return retries;
    },
    async pending() {
      const of = async (durable: Side) => {
        try {
          const info = await jsm.consumers.info(name, durable);
          return info.num_pending + info.num_ack_pending;
        } catch {
          return null;
        }
      };
      return { protected: await of('protected'), control: await of('control') };
    },
    async close() {
      for (const close of closers.splice(0).reverse()) await close();
      await jsm.streams.delete(name).catch(() => {});
      await admin.close().catch(() => {});
    },
  };
}

async function openAmqp(url: string): Promise<ChannelModel> {
  const connection = await amqp.connect(url);
  connection.on('error', () => {});
  return connection;
}

/**
 * RabbitMQ: a durable fanout exchange to a quorum queue per side; consumers connect to `consumerUrl` (the broker,
 * or a proxy before it) and connect again whenever their connection drops, the producer (confirms) and the admin
 * to `url`.
 */
export async function rabbitMqRig(options: { url: string; consumerUrl: string }): Promise<FaultRig> {
  const queues = { protected: unique('idem-fault-p'), control: unique('idem-fault-c') };
  const exchange = unique('idem-fault-fanout');
  const withChannel = async <T>(use: (channel: amqp.Channel) => Promise<T>): Promise<T> => {
    const connection = await openAmqp(options.url);
    try {
      const channel = await connection.createChannel();
      channel.on('error', () => {});
      return await use(channel);
    } finally {
      await connection.close().catch(() => {});
    }
  };
  await withChannel(async (channel) => {
    // Durable: the exchange and its bindings outlive a broker restart (a transient one would not).
    await channel.assertExchange(exchange, 'fanout', { durable: true });
    for (const queue of Object.values(queues)) {
      await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      await channel.bindQueue(queue, exchange, '');
    }
  });
  const stoppers: Array<() => Promise<void>> = [];
  let producer: { connection: ChannelModel; channel: ConfirmChannel } | null = null;
  return {
    async consume(side, consumer) {
      let disconnects = 0;
      let ackErrors = 0;
      let stopped = false;
      let current: { connection: ChannelModel; stop(): Promise<void> } | null = null;
      const ready = deferred();
      const supervise = async () => {
        while (!stopped) {
          let connection: ChannelModel;
          try {
            connection = await openAmqp(options.consumerUrl);
          } catch {
            await sleep(100);
            continue;
          }
          const gone = new Promise<void>((resolve) => connection.once('close', () => resolve()));
          try {
            const channel = await connection.createChannel();
            channel.on('error', () => {});
            const consumption = await consumeRabbitMq({
              channel,
              queue: queues[side],
              consumer,
              prefetch: 10,
              onError: () => {
                ackErrors += 1;
              },
            });
            current = { connection, stop: () => consumption.stop() };
            ready.resolve();
          } catch {
            // The broker is up but not yet serving the queue (a quorum queue electing its leader): again.
            await connection.close().catch(() => {});
            await sleep(100);
            continue;
          }
          await gone;
          current = null;
          if (!stopped) disconnects += 1;
        }
      };
      const supervising = supervise();
      stoppers.push(async () => {
        stopped = true;
        const running = current as { connection: ChannelModel; stop(): Promise<void> } | null;
        if (running) {
          await running.stop().catch(() => {});
          await running.connection.close().catch(() => {});
        }
        await supervising;
      });
      await ready.promise;
      return { disconnects: () => disconnects, ackErrors: () => ackErrors };
    },
    async publish(ids) {
      let retries = 0;
      for (const id of ids)
        for (;;) {
          try {
            if (!producer) {
              const connection = await openAmqp(options.url);
              const channel = await connection.createConfirmChannel();
              channel.on('error', () => {});
              connection.once('close', () => {
                producer = null;
              });
              producer = { connection, channel };
            }
            producer.channel.publish(exchange, '', json({ id }), {
              messageId: id,
              type: 'order.ship',
              persistent: true,
            });
            await producer.channel.waitForConfirms();
            break;
          } catch {
            // Unconfirmed: published again (a copy may have been stored — the consumers see it twice).
            retries += 1;
            const broken = producer;
            producer = null;
            await broken?.connection.close().catch(() => {});
            await sleep(100);
          }
        }
      return retries;
    },
    async pending() {
      try {
        return await withChannel(async (channel) => ({
          protected: (await channel.checkQueue(queues.protected)).messageCount,
          control: (await channel.checkQueue(queues.control)).messageCount,
        }));
      } catch {
        return { protected: null, control: null };
      }
    },
    async close() {
      for (const stop of stoppers.splice(0)) await stop();
      await producer?.connection.close().catch(() => {});
      producer = null;
      await withChannel(async (channel) => {
        for (const queue of Object.values(queues)) await channel.deleteQueue(queue);
        await channel.deleteExchange(exchange);
      }).catch(() => {});
    },
  };
}

/** What one run measured, for its assertions and the report line. */
export interface FaultRun {
  ids: string[];
  held: Record<Side, string[]>;
  logs: Record<Side, Decided[]>;
  effects: Record<Side, Map<string, number>>;
  effectRows: Record<Side, number>;
  disconnects: Record<Side, number>;
  ackErrors: Record<Side, number>;
  publishRetries: number;
}

/**
 * The run described at the top, `n` ids: `fault` once both consumers hold 5 committed, unacknowledged deliveries
 * (after 50 executions each), `restore` once both have seen their connection drop and the held ones were let go.
 * Asserts what must hold in every run (none lost, one effect per id with the inbox, a second effect for every
 * held id without it) and returns the counts.
 */
export async function midStreamFault(options: {
  rig: FaultRig;
  db: Database;
  idempotent: (name: string) => MessageConsumer;
  control: (name: string) => MessageConsumer;
  fault: () => Promise<void>;
  restore: () => Promise<void>;
  n?: number;
}): Promise<FaultRun> {
  const { rig, db } = options;
  const n = options.n ?? 200;
  const names = { protected: unique('shipping'), control: unique('control') };
  const logs: Record<Side, Decided[]> = { protected: [], control: [] };
  const holds = {
    protected: holdingAfterCommit(recording(options.idempotent(names.protected), logs.protected), {
      after: 50,
      count: 5,
    }),
    control: holdingAfterCommit(recording(options.control(names.control), logs.control), {
      after: 50,
      count: 5,
    }),
  };
  const running = {
    protected: await rig.consume('protected', holds.protected.consumer),
    control: await rig.consume('control', holds.control.consumer),
  };
  const ids = Array.from({ length: n }, (_, index) => `${unique('m')}-${index}`);
  const half = Math.floor(n / 2);
  let publishRetries = 0;
  const firstHalf = rig.publish(ids.slice(0, half)).then((retries) => {
    publishRetries += retries;
  });
  // Mid-stream: both consumers have committed 55 messages and hold the last 5 unacknowledged.
  const [heldProtected, heldControl] = await Promise.all([holds.protected.full, holds.control.full]);
  await options.fault();
  // The producer goes on against the fault: its next publishes fail and are retried until the broker is back.
  const rest = firstHalf
    .then(() => rig.publish(ids.slice(half)))
    .then((retries) => {
      publishRetries += retries;
    });
  await expect
    .poll(() => running.protected.disconnects() >= 1 && running.control.disconnects() >= 1)
    .toBe(true);
  await options.restore();
  const held = { protected: heldProtected, control: heldControl };
  // The held deliveries stay unacknowledged until the broker has delivered each of them again (RabbitMQ: requeued
  // when the connection dropped; JetStream: past AckWait). Only then do they return to their adapter, whose ack
  // goes to a channel that is gone (RabbitMQ) or arrives after the redelivery (JetStream: a NATS client sends
  // what it buffered while disconnected once it is back, so an ack let go earlier could still land in time).
  const deliveredAgain = (which: Side) => held[which].every((id) => deliveries(logs[which], id) >= 2);
  await expect
    .poll(() => deliveredAgain('protected') && deliveredAgain('control'), { timeout: 60_000, interval: 100 })
    .toBe(true);
  holds.protected.release();
  holds.control.release();
  await rest;
  // Done: every id has its effect on both sides, each held id was delivered again and handled, and the broker has
  // nothing left to deliver. (A state, not a time: a run that never gets there fails showing where it stopped.)
  const progress = async () => {
    const pending = await rig.pending();
    const side = async (which: Side) => ({
      idsWithoutEffect: n - (await effectsOf(db, names[which])).size,
      heldNotDeliveredAgain: held[which].filter((id) => deliveries(logs[which], id) < 2).length,
      pendingAtBroker: pending[which],
    });
    return { protected: await side('protected'), control: await side('control') };
  };
  const done = { idsWithoutEffect: 0, heldNotDeliveredAgain: 0, pendingAtBroker: 0 };
  await expect.poll(progress, { timeout: 60_000, interval: 200 }).toEqual({ protected: done, control: done });
  await rig.close();

  const effects = {
    protected: await effectsOf(db, names.protected),
    control: await effectsOf(db, names.control),
  };
  // None lost, on either side; with the inbox exactly one effect per id.
  expect([...effects.protected.keys()].sort()).toEqual([...ids].sort());
  expect([...effects.protected.entries()].filter(([, count]) => count !== 1)).toEqual([]);
  expect([...effects.control.keys()].sort()).toEqual([...ids].sort());
  // The held ids came back: with the inbox acknowledged as duplicates, without it run a second time.
  for (const id of held.protected)
    expect(
      logs.protected
        .filter(({ message }) => message.id === id)
        .slice(1)
        .map(({ decision }) => (decision.action === 'ack' ? decision.outcome : decision.action)),
    ).toContain('duplicate');
  for (const id of held.control) expect(effects.control.get(id)).toBeGreaterThanOrEqual(2);

  return {
    ids,
    held,
    logs,
    effects,
    effectRows: {
      protected: await effectCount(db, names.protected),
      control: await effectCount(db, names.control),
    },
    disconnects: { protected: running.protected.disconnects(), control: running.control.disconnects() },
    ackErrors: { protected: running.protected.ackErrors(), control: running.control.ackErrors() },
    publishRetries,
  };
}

/**
 * How often `id` was delivered. Not `deliveryCount`: after a SIGKILL, nats-server 2.9 may restore a consumer
 * state older than its last deliveries and deliver them again as first deliveries (`deliveryCount` 1).
 */
function deliveries(log: Decided[], id: string): number {
  return log.filter(({ message }) => message.id === id).length;
}

/** The report line of a run: protected / control. */
export function describeRun(fault: string, run: FaultRun): string {
  const duplicates = (log: Decided[]) =>
    log.filter(({ decision }) => decision.action === 'ack' && decision.outcome === 'duplicate').length;
  // Deliveries of an id seen before, and of those how many the broker counted as first deliveries.
  const again = (log: Decided[]) => {
    const seen = new Set<string>();
    let total = 0;
    let uncounted = 0;
    for (const { message } of log) {
      if (seen.has(message.id)) {
        total += 1;
        if (message.deliveryCount === 1) uncounted += 1;
      }
      seen.add(message.id);
    }
    return uncounted ? `${total} redelivered (${uncounted} with deliveryCount 1)` : `${total} redelivered`;
  };
  const twice = [...run.effects.control.values()].filter((count) => count > 1).length;
  return (
    `${fault}, ${run.ids.length} ids: ${run.effectRows.protected} effects, one per id ` +
    `(${run.logs.protected.length} deliveries, ${again(run.logs.protected)}, ${duplicates(run.logs.protected)} acked as duplicates) / ` +
    `${run.effectRows.control} effects, ${twice} ids run more than once (${run.logs.control.length} deliveries, ${again(run.logs.control)}); ` +
    `held ${run.held.protected.length}+${run.held.control.length}, acks lost on the dead connection ` +
    `(failed in the adapter: ${run.ackErrors.protected}+${run.ackErrors.control}), publish retries ${run.publishRetries}`
  );
}
