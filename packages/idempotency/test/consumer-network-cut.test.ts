/**
 * The network between the consumers and the broker cut mid-stream, on the machine's shared RabbitMQ and NATS
 * (never stopped: only the link is cut). The consumers connect through a TCP proxy on loopback
 * (support/faults.ts); the producer and the test's admin connect directly. A producer publishes 200 ids while the
 * protected consumer (the inbox) and its CONTROL (no inbox, fed the same messages) drain them; each holds 5
 * deliveries after the commit, before the ack; the proxy then destroys every connection through it, both sides,
 * and refuses new ones until both consumers have seen the drop and let the held deliveries go (their acks die
 * with the connection); then it lets connections through again. The flow and its assertions:
 * support/fault-rigs.ts (RabbitMQ: the rig reconnects, amqplib does not; JetStream: the client does).
 */
import { createPrismaClient, type Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotentConsumer } from '../src/consumer/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { AMQP_URL, NATS_SERVERS } from './support/brokers.ts';
import { ownTableUrl } from './support/db.ts';
import {
  describeRun,
  type FaultRig,
  jetStreamRig,
  midStreamFault,
  rabbitMqRig,
} from './support/fault-rigs.ts';
import { EFFECTS_DDL, plainConsumer, recordEffect } from './support/queue.ts';
import { type TcpProxy, tcpProxy } from './support/tcp-proxy.ts';

let db: Database;
/** Measured counts, printed once at the end (docs/RELIABILITY.md). */
const report: string[] = [];

beforeAll(async () => {
  db = createPrismaClient({ connectionString: await ownTableUrl(), max: 6 });
  await db.$executeRawUnsafe(EFFECTS_DDL);
});
afterAll(async () => {
  await db?.$disconnect();
  if (report.length) console.log(`Network cut mid-stream (protected / control):\n  ${report.join('\n  ')}`);
});

const idempotent = (name: string) =>
  createIdempotentConsumer({
    store: createPrismaIdempotencyStore(db),
    name,
    handler: (message, tx) => recordEffect(tx, name, message),
  });
const control = (name: string) => plainConsumer(db, (message, tx) => recordEffect(tx, name, message));

/** host:port of a broker address (`amqp://user:pass@host:port`, or NATS' `host:port`). */
function portOf(address: string): number {
  const port = Number(/:(\d+)\/?$/.exec(address)?.[1]);
  if (!port) throw new Error(`no port in ${address}`);
  return port;
}

async function cutMidStream(rigThrough: (proxy: TcpProxy) => Promise<FaultRig>, proxy: TcpProxy) {
  try {
    const rig = await rigThrough(proxy);
    const run = await midStreamFault({
      rig,
      db,
      idempotent,
      control,
      fault: async () => proxy.cut(),
      restore: async () => proxy.restore(),
    });
    // Connections through the proxy after the cut: each consumer connected again.
    expect(proxy.connections).toBeGreaterThanOrEqual(4);
    return run;
  } finally {
    await proxy.close();
  }
}

describe('the network cut between the consumers and the broker, mid-stream', () => {
  it('RabbitMQ: the rig reconnects, the broker requeues what the cut connections held: one effect per id, none lost (CONTROL: the held ids run twice)', async () => {
    const proxy = await tcpProxy(portOf(AMQP_URL));
    const run = await cutMidStream(
      (through) =>
        rabbitMqRig({
          url: AMQP_URL,
          consumerUrl: AMQP_URL.replace(/:\d+\/?$/, `:${through.port}`),
        }),
      proxy,
    );
    // The held deliveries' acks threw on the dead channel.
    expect(run.ackErrors.protected).toBeGreaterThanOrEqual(5);
    report.push(describeRun('RabbitMQ, cut', run));
  }, 90_000);

  it('JetStream: the client reconnects, the acks given while cut are dropped, AckWait redelivers: one effect per id, none lost (CONTROL: the held ids run twice)', async () => {
    const proxy = await tcpProxy(portOf(NATS_SERVERS));
    const run = await cutMidStream(
      (through) =>
        jetStreamRig({
          servers: NATS_SERVERS,
          consumerServers: `127.0.0.1:${through.port}`,
          ackWaitMs: 2_000,
        }),
      proxy,
    );
    report.push(describeRun('JetStream, cut', run));
  }, 90_000);
});
