/**
 * RabbitMQ restarted mid-stream, on a private node (a second RabbitMQ node started by the test as a child
 * process: its own node name, AMQP and distribution ports on free ports, Mnesia and logs in a temp dir, no
 * plugins — the machine's node on 5672 is never touched): a producer publishes 200 ids through a durable fanout
 * exchange while the protected consumer (the inbox) and its CONTROL (no inbox, its own quorum queue with the same
 * messages) drain them; each holds 5 deliveries after the commit, before the ack; the node is stopped (SIGTERM)
 * and started again on the same ports and Mnesia dir. amqplib does not reconnect, nor does the adapter: the rig
 * connects again and consumes again, as an application must; the held deliveries' acks throw on the dead
 * channel, and the quorum queues deliver them again. The flow and its assertions: support/fault-rigs.ts.
 *
 * SIGTERM, not SIGKILL: SIGKILLed seconds after the quorum queues were declared, the restarted 3.10 node logged
 * "running pre init for 0 registered servers" and "leader not known" for each of them, and a publish was nacked
 * after 65 s — the queues did not come back within any time a test can wait (by the look of it, the Ra server
 * registry had not been written to disk yet; not pursued further). That is the broker's durability, not the
 * consumer's; JetStream's test covers SIGKILL (consumer-restart-jetstream.test.ts), and the network-cut test a
 * connection dropped under the consumer. One restart only: a node boots in 5–10 s here (Erlang, on a loaded
 * 2-core machine).
 */
import { createPrismaClient, type Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotentConsumer } from '../src/consumer/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { ownTableUrl } from './support/db.ts';
import { describeRun, midStreamFault, rabbitMqRig } from './support/fault-rigs.ts';
import { type PrivateBroker, privateRabbitMqNode } from './support/faults.ts';
import { EFFECTS_DDL, plainConsumer, recordEffect } from './support/queue.ts';

let db: Database;
let broker: PrivateBroker | undefined;
/** Measured counts, printed once at the end (docs/RELIABILITY.md). */
const report: string[] = [];

beforeAll(async () => {
  [broker] = await Promise.all([
    privateRabbitMqNode(),
    (async () => {
      db = createPrismaClient({ connectionString: await ownTableUrl(), max: 6 });
      await db.$executeRawUnsafe(EFFECTS_DDL);
    })(),
  ]);
});
afterAll(async () => {
  await broker?.dispose();
  await db?.$disconnect();
  if (report.length)
    console.log(`RabbitMQ restart mid-stream (protected / control):\n  ${report.join('\n  ')}`);
});

const idempotent = (name: string) =>
  createIdempotentConsumer({
    store: createPrismaIdempotencyStore(db),
    name,
    handler: (message, tx) => recordEffect(tx, name, message),
  });
const control = (name: string) => plainConsumer(db, (message, tx) => recordEffect(tx, name, message));

describe('RabbitMQ: the node restarted mid-stream', () => {
  // 90 s: the node stops (about 1 s) and Erlang boots it again (5–10 s here) inside the test.
  it('SIGTERM, then started again on the same ports and Mnesia dir: the rig reconnects, one effect per id with the inbox, none lost (CONTROL: the held ids run twice)', async () => {
    const node = broker as PrivateBroker;
    const url = `amqp://guest:guest@127.0.0.1:${node.port}`;
    const rig = await rabbitMqRig({ url, consumerUrl: url });
    const run = await midStreamFault({
      rig,
      db,
      idempotent,
      control,
      fault: () => node.kill('SIGTERM'),
      restore: () => node.start(),
    });
    // The held deliveries' acks threw on the dead channel.
    expect(run.ackErrors.protected).toBeGreaterThanOrEqual(5);
    report.push(
      `${describeRun('SIGTERM mid-stream', run)}; node boot ${node.startups.join(' ms, reboot ')} ms`,
    );
  }, 90_000);
});
