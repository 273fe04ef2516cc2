/**
 * NATS JetStream restarted mid-stream, on a private nats-server (a child process on a free port, file storage in
 * a temp dir — the machine's shared server on 4222 is never touched): a producer publishes 200 ids while the
 * protected consumer (the inbox) and its CONTROL (no inbox; a second durable of the same stream, so it sees the
 * same messages) drain them; each holds 5 deliveries after the commit, before the ack; the server is killed
 * (SIGKILL, then in a second run SIGTERM) and started again on the same port and store. The client reconnects by
 * itself and the pull consumer pulls again; the held deliveries' acks are lost with the connection, so JetStream
 * redelivers them after AckWait (2 s). The flow and its assertions: support/fault-rigs.ts.
 */
import { createPrismaClient, type Database } from '@idem/db';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotentConsumer } from '../src/consumer/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { ownTableUrl } from './support/db.ts';
import { describeRun, jetStreamRig, midStreamFault } from './support/fault-rigs.ts';
import { type PrivateBroker, privateNatsServer } from './support/faults.ts';
import { EFFECTS_DDL, plainConsumer, recordEffect } from './support/queue.ts';

let db: Database;
const brokers: PrivateBroker[] = [];
/** Measured counts, printed once at the end (docs/RELIABILITY.md). */
const report: string[] = [];

beforeAll(async () => {
  db = createPrismaClient({ connectionString: await ownTableUrl(), max: 6 });
  await db.$executeRawUnsafe(EFFECTS_DDL);
});
afterEach(async () => {
  for (const broker of brokers.splice(0)) await broker.dispose();
});
afterAll(async () => {
  for (const broker of brokers.splice(0)) await broker.dispose();
  await db?.$disconnect();
  if (report.length)
    console.log(`JetStream restart mid-stream (protected / control):\n  ${report.join('\n  ')}`);
});

const idempotent = (name: string) =>
  createIdempotentConsumer({
    store: createPrismaIdempotencyStore(db),
    name,
    handler: (message, tx) => recordEffect(tx, name, message),
  });
const control = (name: string) => plainConsumer(db, (message, tx) => recordEffect(tx, name, message));

describe('JetStream: the server restarted mid-stream', () => {
  for (const signal of ['SIGKILL', 'SIGTERM'] as const)
    it(`${signal}, then started again on the same port and store: every id once with the inbox, none lost (CONTROL: the held ids run twice)`, async () => {
      const broker = await privateNatsServer();
      brokers.push(broker);
      const servers = `127.0.0.1:${broker.port}`;
      const rig = await jetStreamRig({ servers, consumerServers: servers, ackWaitMs: 2_000 });
      const run = await midStreamFault({
        rig,
        db,
        idempotent,
        control,
        fault: () => broker.kill(signal),
        restore: () => broker.start(),
      });
      expect(run.disconnects.protected).toBeGreaterThanOrEqual(1);
      report.push(
        `${describeRun(`${signal} mid-stream`, run)}; server start ${broker.startups.join(' ms, restart ')} ms`,
      );
    }, 90_000);
});
