/**
 * The idempotent consumer and the outbox on a real NATS JetStream (durable pull consumers, explicit acks, AckWait
 * redelivery, `Nats-Msg-Id`) and Postgres, fault by fault. Each protected run has a CONTROL built here, on the
 * test side: the same messages through a consumer without the inbox (support/queue.ts). A stream's messages go to
 * every durable consumer of it, so the protected durable and the control durable see the very same messages.
 *
 * JetStream drops a publish whose `Nats-Msg-Id` it stored within the stream's duplicate window. To deliver one id
 * twice, the tests use a 100 ms window and publish the second copy once JetStream stores it (`publishStored`:
 * again until the acknowledgement is no longer `duplicate` — a state, not a sleep). Streams are unique per test and
 * deleted after it.
 */
import { createPrismaClient, type Database } from '@idem/db';
import {
  AckPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { connect, headers, type NatsConnection, nanos } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsumerAnomaly,
  createIdempotentConsumer,
  createOutbox,
  fingerprintBody,
  type MessageConsumer,
  outboxSchema,
} from '../src/consumer/index.ts';
import {
  consumeJetStream,
  jetStreamPublisher,
  MESSAGE_TYPE_HEADER,
} from '../src/consumer/jetstream/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import {
  CONTROL_ID_HEADER,
  NATS_SERVERS,
  plainJetStreamPublisher,
  relayThatDiesBeforeTheMark,
} from './support/brokers.ts';
import { deferred, ownTableUrl } from './support/db.ts';
import {
  type Decided,
  EFFECTS_DDL,
  effectCount,
  effectsOf,
  json,
  plainConsumer,
  recordEffect,
  recording,
  unique,
} from './support/queue.ts';

let url: string;
let db: Database;
let nc: NatsConnection;
let jsm: JetStreamManager;
let js: JetStreamClient;
const cleanups: Array<() => Promise<unknown>> = [];
/** Measured counts, printed once at the end (docs/RELIABILITY.md). */
const report: string[] = [];

beforeAll(async () => {
  url = await ownTableUrl();
  db = createPrismaClient({ connectionString: url, max: 8 });
  await db.$executeRawUnsafe(EFFECTS_DDL);
  nc = await connect({ servers: NATS_SERVERS });
  jsm = await jetstreamManager(nc);
  js = jetstream(nc);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});
afterAll(async () => {
  await nc?.close();
  await db?.$disconnect();
  if (report.length) console.log(`JetStream fault tests (protected / control):\n  ${report.join('\n  ')}`);
});

/**
 * A stream on `<name>.>` (duplicate window `windowMs`) with two durable pull consumers on `<name>.orders`, which
 * deliver a message again when it is not acked within `ackWaitMs` (long by default: only the crash test waits
 * for a redelivery, and a short AckWait would add redeliveries of its own on a loaded machine).
 */
async function stream({
  windowMs = 100,
  ackWaitMs = 30_000,
} = {}): Promise<{ name: string; subject: string }> {
  const name = unique('idem').replace('-', '_');
  await jsm.streams.add({ name, subjects: [`${name}.>`], duplicate_window: nanos(windowMs) });
  cleanups.push(() => jsm.streams.delete(name));
  for (const durable of ['protected', 'control'])
    await jsm.consumers.add(name, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(ackWaitMs),
      filter_subject: `${name}.orders`,
    });
  return { name, subject: `${name}.orders` };
}

/** Consumes the durable `durable` of `streamName` with `consumer`, on a connection of its own (closed after the test). */
async function consume(
  streamName: string,
  durable: 'protected' | 'control',
  consumer: MessageConsumer,
  options: { connection?: NatsConnection; onError?: (error: unknown) => void } = {},
) {
  const own = options.connection ?? (await connect({ servers: NATS_SERVERS }));
  const messages = await (await jetstream(own).consumers.get(streamName, durable)).consume({
    max_messages: 10,
  });
  const loop = consumeJetStream({ messages, consumer, onError: options.onError });
  // A connection closed under a test (the crash) ends its loop in an error; the test looks at what was delivered.
  loop.catch(() => {});
  cleanups.push(async () => {
    await messages.close().catch(() => {});
    await loop.catch(() => {});
    await own.close().catch(() => {});
  });
  return { connection: own, loop };
}

/** Publishes `id` with `body` to `subject`, again until JetStream stores it (not `duplicate`). */
async function publishStored(subject: string, id: string, body: unknown): Promise<void> {
  for (;;) {
    const set = headers();
    set.set(MESSAGE_TYPE_HEADER, 'order.ship');
    const ack = await js.publish(subject, json(body), { msgID: id, headers: set });
    if (!ack.duplicate) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Waits until JetStream has forgotten every `Nats-Msg-Id` published to `streamName` so far: it forgets them in the
 * order they came, so once a sentinel published after them is stored a second time, they are all past the window.
 */
async function outlastDuplicateWindow(streamName: string): Promise<void> {
  const sentinel = unique('sentinel');
  await js.publish(`${streamName}.sentinel`, json({}), { msgID: sentinel });
  await publishStored(`${streamName}.sentinel`, sentinel, {});
}

function idempotent(
  name: string,
  options: { db?: Database; onAnomaly?: (anomaly: ConsumerAnomaly) => void } = {},
) {
  return createIdempotentConsumer({
    store: createPrismaIdempotencyStore(options.db ?? db),
    name,
    handler: (message, tx) => recordEffect(tx, name, message),
    onAnomaly: options.onAnomaly ?? (() => {}),
  });
}

/** CONTROL: the same effect, no inbox; the id from `Nats-Msg-Id`, or from the control publisher's header. */
function control(name: string) {
  return plainConsumer(db, (message, tx) =>
    recordEffect(tx, name, { ...message, id: message.id || (message.headers[CONTROL_ID_HEADER] ?? '') }),
  );
}

const outcomes = (log: Decided[]) =>
  log.map(({ decision }) => (decision.action === 'ack' ? decision.outcome : decision.action));

describe('JetStream: the idempotent consumer', () => {
  it('the same message stored twice (the second past the duplicate window): one effect (CONTROL without the inbox: two)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const { name: streamName, subject } = await stream();
    const protectedLog: Decided[] = [];
    const controlLog: Decided[] = [];
    await consume(streamName, 'protected', recording(idempotent(name), protectedLog));
    await consume(streamName, 'control', recording(control(controlName), controlLog));

    const id = unique('m');
    await publishStored(subject, id, { orderId: 'o-1' });
    await publishStored(subject, id, { orderId: 'o-1' });
    await expect.poll(() => protectedLog.length + controlLog.length).toBe(4);

    expect(outcomes(protectedLog)).toEqual(['executed', 'duplicate']);
    expect(await effectsOf(db, name)).toEqual(new Map([[id, 1]]));
    expect(await effectsOf(db, controlName)).toEqual(new Map([[id, 2]]));
    report.push('same message stored twice: 1 effect / 2');
  });

  it('a consumer that dies after the commit, before the ack (its connection closed): redelivered after AckWait, one effect (CONTROL: two)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const { name: streamName, subject } = await stream({ ackWaitMs: 1_000 });
    const runs = [
      { durable: 'protected' as const, consumer: idempotent(name), log: [] as Decided[], died: deferred() },
      { durable: 'control' as const, consumer: control(controlName), log: [] as Decided[], died: deferred() },
    ];
    for (const run of runs) {
      const doomed = await connect({ servers: NATS_SERVERS });
      // The first consumer commits the effect, then its connection goes before the adapter can ack.
      const dying: MessageConsumer = {
        async handle(message) {
          const decision = await run.consumer.handle(message);
          await doomed.close();
          run.died.resolve();
          return decision;
        },
      };
      await consume(streamName, run.durable, dying, { connection: doomed });
    }
    const id = unique('m');
    await publishStored(subject, id, { orderId: 'o-1' });
    for (const run of runs) {
      await run.died.promise;
      await consume(streamName, run.durable, recording(run.consumer, run.log));
    }
    await expect.poll(() => runs.every((run) => run.log.length >= 1)).toBe(true);

    // A handler slower than the 1 s AckWait would be delivered once more: what is asserted holds either way.
    const [protectedRun, controlRun] = runs;
    expect(protectedRun?.log[0]?.message.deliveryCount).toBe(2);
    expect(new Set(outcomes(protectedRun?.log ?? []))).toEqual(new Set(['duplicate']));
    expect(await effectsOf(db, name)).toEqual(new Map([[id, 1]]));
    expect(outcomes(controlRun?.log ?? [])[0]).toBe('executed');
    const controlEffects = (await effectsOf(db, controlName)).get(id) ?? 0;
    expect(controlEffects).toBeGreaterThanOrEqual(2);
    report.push(`consumer killed after commit, before ack: 1 effect / ${controlEffects}`);
  });

  it('three consumers on one durable, 100 messages each stored twice: exactly one effect per id, none lost (CONTROL: two per id)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const { name: streamName, subject } = await stream();
    const protectedLogs: Decided[][] = [[], [], []];
    const controlLog: Decided[] = [];
    for (const log of protectedLogs) {
      // Each consumer as if in a process of its own: its own connection, pool and store.
      const own = createPrismaClient({ connectionString: url, max: 3 });
      cleanups.push(() => own.$disconnect());
      const { connection } = await consume(
        streamName,
        'protected',
        recording(idempotent(name, { db: own }), log),
      );
      await consume(streamName, 'control', recording(control(controlName), controlLog), { connection });
    }
    const ids = Array.from({ length: 100 }, () => unique('m'));
    const publishAll = () =>
      Promise.all(
        ids.map((id) => {
          const set = headers();
          set.set(MESSAGE_TYPE_HEADER, 'order.ship');
          return js.publish(subject, json({ id }), { msgID: id, headers: set });
        }),
      );
    expect((await publishAll()).filter((ack) => ack.duplicate)).toEqual([]);
    await outlastDuplicateWindow(streamName);
    expect((await publishAll()).filter((ack) => ack.duplicate)).toEqual([]);
    // At least once: a loaded run saw 413 deliveries for the 400 copies (JetStream delivered some again). Done is
    // a state: every copy delivered and nothing left pending or unacknowledged on either durable.
    const settled = async () => {
      const [mine, theirs] = await Promise.all(
        ['protected', 'control'].map((durable) => jsm.consumers.info(streamName, durable)),
      );
      return [mine, theirs].every((info) => info?.num_pending === 0 && info.num_ack_pending === 0);
    };
    await expect
      .poll(async () => protectedLogs.flat().length + controlLog.length >= 400 && (await settled()))
      .toBe(true);

    const protectedEffects = await effectsOf(db, name);
    expect([...protectedEffects.keys()].sort()).toEqual([...ids].sort());
    expect([...protectedEffects.values()].every((n) => n === 1)).toBe(true);
    const all = protectedLogs.flat();
    expect(outcomes(all).filter((outcome) => outcome === 'executed')).toHaveLength(100);
    expect(outcomes(all).filter((outcome) => outcome === 'duplicate').length).toBeGreaterThanOrEqual(100);
    const controlEffects = await effectsOf(db, controlName);
    expect(controlEffects.size).toBe(100);
    expect([...controlEffects.values()].every((n) => n >= 2)).toBe(true);
    report.push(
      `three consumers, 100 ids × 2 copies: 100 effects (per consumer ${protectedLogs.map((log) => log.length).join('/')} deliveries) / ${await effectCount(db, controlName)}`,
    );
  });

  it('a poison message is terminated and dead-lettered after N = 3 deliveries, with no effect (CONTROL without the limit: delivered again and again)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const { name: streamName, subject } = await stream();
    const deadLetters = `${streamName}_dlq`;
    await jsm.streams.add({ name: deadLetters, subjects: [`${deadLetters}.>`] });
    cleanups.push(() => jsm.streams.delete(deadLetters));
    const failing = async () => {
      throw new Error('cannot ship to the moon');
    };
    const protectedLog: Decided[] = [];
    const controlLog: Decided[] = [];
    const poison = createIdempotentConsumer({
      store: createPrismaIdempotencyStore(db),
      name,
      maxDeliveries: 3,
      backoff: { initialMs: 1, maxMs: 1 },
      handler: async (message, tx) => {
        await recordEffect(tx, name, message);
        await failing();
      },
    });
    const own = await connect({ servers: NATS_SERVERS });
    const messages = await (await jetstream(own).consumers.get(streamName, 'protected')).consume({
      max_messages: 10,
    });
    const loop = consumeJetStream({
      messages,
      consumer: recording(poison, protectedLog),
      deadLetter: async (delivery: JsMsg) => {
        await jetstream(own).publish(`${deadLetters}.orders`, delivery.data, { headers: delivery.headers });
      },
    });
    cleanups.push(async () => {
      await messages.close();
      await loop;
      await own.close();
    });
    const id = unique('m');
    await publishStored(subject, id, { orderId: 'moon' });

    await expect.poll(async () => (await jsm.streams.info(deadLetters)).state.messages).toBe(1);
    expect(protectedLog.map(({ message }) => message.deliveryCount)).toEqual([1, 2, 3]);
    expect(outcomes(protectedLog)).toEqual(['retry', 'retry', 'dead-letter']);
    expect(protectedLog[2]?.decision).toMatchObject({ reason: 'max-deliveries' });
    const dead = await jsm.streams.getMessage(deadLetters, { last_by_subj: `${deadLetters}.orders` });
    expect(dead?.header.get('Nats-Msg-Id')).toBe(id);
    // Terminated: nothing pending or awaiting an ack on the durable.
    await expect
      .poll(async () => {
        const info = await jsm.consumers.info(streamName, 'protected');
        return [info.num_pending, info.num_ack_pending];
      })
      .toEqual([0, 0]);
    expect(await effectCount(db, name)).toBe(0);

    await consume(
      streamName,
      'control',
      recording(
        plainConsumer(db, async (message, tx) => {
          await recordEffect(tx, controlName, message);
          await failing();
        }),
        controlLog,
      ),
    );
    await expect.poll(() => controlLog.length >= 6).toBe(true);
    expect(controlLog.slice(0, 6).map(({ message }) => message.deliveryCount)).toEqual([1, 2, 3, 4, 5, 6]);
    report.push(
      `poison message, N = 3: terminated after 3 deliveries, 0 effects / still redelivered at ${controlLog.length}`,
    );
  });

  it('a redelivered id with another body: not executed, reported (CONTROL: executed)', async () => {
    const [name, controlName] = [unique('shipping'), unique('control')];
    const { name: streamName, subject } = await stream();
    const anomalies: ConsumerAnomaly[] = [];
    const protectedLog: Decided[] = [];
    const controlLog: Decided[] = [];
    await consume(
      streamName,
      'protected',
      recording(idempotent(name, { onAnomaly: (a) => anomalies.push(a) }), protectedLog),
    );
    await consume(streamName, 'control', recording(control(controlName), controlLog));

    const id = unique('m');
    await publishStored(subject, id, { orderId: 'o-1' });
    await expect.poll(() => protectedLog.length + controlLog.length).toBe(2);
    await publishStored(subject, id, { orderId: 'o-2' });
    await expect.poll(() => protectedLog.length + controlLog.length).toBe(4);

    expect(outcomes(protectedLog)).toEqual(['executed', 'anomaly']);
    expect(anomalies).toEqual([
      expect.objectContaining({
        consumer: name,
        id,
        fingerprint: fingerprintBody(json({ orderId: 'o-2' })),
        storedFingerprint: fingerprintBody(json({ orderId: 'o-1' })),
      }),
    ]);
    expect(await effectsOf(db, name)).toEqual(new Map([[id, 1]]));
    expect(await effectsOf(db, controlName)).toEqual(new Map([[id, 2]]));
    report.push('redelivered id, another body: not run, 1 anomaly reported, 1 effect / 2');
  });
});

describe('JetStream: the outbox', () => {
  async function outboxTable() {
    const table = unique('outbox').replace('-', '_');
    for (const statement of outboxSchema(table).statements) await db.$executeRawUnsafe(statement);
    cleanups.push(() => db.$executeRawUnsafe(`drop table ${table}`));
    return { table, outbox: createOutbox(db, { table }) };
  }

  /** JetStream's acknowledgements of the relay's publishes. */
  function acknowledged(acks: Array<{ duplicate: boolean }>) {
    return {
      publish: async (...args: Parameters<JetStreamClient['publish']>) => {
        const ack = await js.publish(...args);
        acks.push(ack);
        return ack;
      },
    };
  }

  it('a relay SIGKILLed between the publish acknowledgement and the mark publishes again on restart: within the duplicate window JetStream drops it, past it the inbox absorbs it — one effect either way (CONTROL, published without Nats-Msg-Id to a consumer without the inbox: two)', async () => {
    const effects: Record<string, [number, number]> = {};
    for (const window of ['within', 'past'] as const) {
      const name = unique('shipping');
      const { name: streamName, subject } = await stream({ windowMs: window === 'within' ? 120_000 : 100 });
      const { table, outbox } = await outboxTable();
      const log: Decided[] = [];
      await consume(streamName, 'protected', recording(idempotent(name), log));
      const id = await db.$transaction((tx) =>
        outbox.enqueue(tx, { type: 'order.ship', destination: subject, body: { orderId: 'o-1' } }),
      );
      await relayThatDiesBeforeTheMark({ DATABASE_URL: url, OUTBOX_TABLE: table, BROKER: 'jetstream' });
      expect(await outbox.countUnsent()).toBe(1);
      if (window === 'past') await outlastDuplicateWindow(streamName);

      const acks: Array<{ duplicate: boolean }> = [];
      const relay = jetStreamPublisher({ js: acknowledged(acks), headers });
      await expect.poll(() => outbox.relayBatch(relay)).toBe(1);
      expect(acks.map((ack) => ack.duplicate)).toEqual([window === 'within']);
      await expect.poll(() => log.length).toBe(window === 'within' ? 1 : 2);
      expect(outcomes(log)).toEqual(window === 'within' ? ['executed'] : ['executed', 'duplicate']);
      expect(await effectsOf(db, name)).toEqual(new Map([[id, 1]]));
      effects[window] = [log.length, await effectCount(db, name)];
    }

    const controlName = unique('control');
    const { name: streamName, subject } = await stream({ windowMs: 120_000 });
    const { table, outbox } = await outboxTable();
    const controlLog: Decided[] = [];
    await consume(streamName, 'control', recording(control(controlName), controlLog));
    const id = await db.$transaction((tx) =>
      outbox.enqueue(tx, { type: 'order.ship', destination: subject, body: { orderId: 'o-1' } }),
    );
    await relayThatDiesBeforeTheMark({
      DATABASE_URL: url,
      OUTBOX_TABLE: table,
      BROKER: 'jetstream',
      PUBLISH: 'plain',
    });
    await expect.poll(() => outbox.relayBatch(plainJetStreamPublisher(js))).toBe(1);
    await expect.poll(() => controlLog.length).toBe(2);
    expect(await effectsOf(db, controlName)).toEqual(new Map([[id, 2]]));
    report.push(
      `relay killed between ack and mark: published twice; within the window ${effects.within?.[0]} delivery, ${effects.within?.[1]} effect; past it ${effects.past?.[0]} deliveries, ${effects.past?.[1]} effect / control ${controlLog.length} deliveries, 2 effects`,
    );
  });
});
