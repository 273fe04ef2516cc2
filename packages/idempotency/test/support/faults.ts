/**
 * What the broker fault tests share (consumer-restart-*.test.ts, consumer-network-cut.test.ts): private broker
 * instances a test may kill (child processes on free ports, data in a temp dir — the machine's shared brokers on
 * 5672 and 4222 are never stopped), a TCP proxy on loopback the test can cut, and the consumer that holds its
 * deliveries after the commit and before the ack, so that a fault certainly lands between the two.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { MessageConsumer } from '../../src/consumer/index.ts';
import { deferred, sleep } from './db.ts';

/** A TCP port nothing listens on (as of now). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Resolves once `port` accepts a connection; rejects if `child` exits first or after `timeoutMs`. */
async function accepting(port: number, child: ChildProcess, output: () => string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(
        `the broker exited (${child.exitCode ?? child.signalCode}) before it listened:\n${output()}`,
      );
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`port ${port} not open after ${timeoutMs} ms:\n${output()}`);
    await sleep(50);
  }
}

/** Resolves once `port` refuses connections. */
async function closed(port: number) {
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (!open) return;
    await sleep(50);
  }
}

/** A broker process the test owns: killed, started again on the same port and data dir, removed after. */
export interface PrivateBroker {
  readonly port: number;
  /** Milliseconds each start took until the port accepted connections. */
  readonly startups: number[];
  /** Kills the broker with `signal` and resolves once it has exited. */
  kill(signal: 'SIGKILL' | 'SIGTERM'): Promise<void>;
  /** Starts it again (same port, same data). */
  start(): Promise<void>;
  /** Kills it (if running) and removes its data. */
  dispose(): Promise<void>;
}

function privateBroker(options: {
  port: number;
  dir: string;
  command: string;
  args: string[];
  env?: Record<string, string>;
  startTimeoutMs: number;
}): PrivateBroker {
  let child: ChildProcess | null = null;
  let output = '';
  const startups: number[] = [];
  const exited = (process: ChildProcess) =>
    process.exitCode !== null || process.signalCode !== null
      ? Promise.resolve()
      : new Promise<void>((resolve) => process.once('exit', () => resolve()));
  const kill = async (signal: 'SIGKILL' | 'SIGTERM') => {
    const running = child;
    if (!running?.pid) return;
    child = null;
    // Its own process group (detached): the broker and whatever it started (RabbitMQ's Erlang helpers).
    try {
      process.kill(-running.pid, signal);
    } catch {}
    await exited(running);
    if (signal === 'SIGTERM')
      try {
        // Helpers the broker left behind once it is gone.
        process.kill(-running.pid, 'SIGKILL');
      } catch {}
    // The child is a launcher (RabbitMQ's is a shell script): its exit may come before the broker's own, so until
    // the port refuses connections the broker is not gone (and a start would find the old one listening).
    await closed(options.port);
  };
  return {
    port: options.port,
    startups,
    kill,
    async start() {
      const started = performance.now();
      output = '';
      const spawned = spawn(options.command, options.args, {
        env: { ...process.env, ...options.env },
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = spawned;
      const collect = (chunk: Buffer) => {
        output = (output + chunk.toString()).slice(-4_000);
      };
      spawned.stdout?.on('data', collect);
      spawned.stderr?.on('data', collect);
      await accepting(options.port, spawned, () => output, options.startTimeoutMs);
      startups.push(Math.round(performance.now() - started));
    },
    async dispose() {
      await kill('SIGKILL');
      await rm(options.dir, { recursive: true, force: true });
    },
  };
}

/** nats-server with JetStream, file storage in a temp dir, on a free port. Started. */
export async function privateNatsServer(): Promise<PrivateBroker> {
  const port = await freePort();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'idem-nats-'));
  const broker = privateBroker({
    port,
    dir,
    command: process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server',
    args: ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir],
    startTimeoutMs: 30_000,
  });
  await broker.start();
  return broker;
}

/**
 * A second RabbitMQ node: its own node name, AMQP and distribution ports, Mnesia and log dirs, config (only its
 * listener) and an empty plugin list, so nothing of it meets the machine's node but epmd. Started; Erlang boots
 * it in 7–11 s on this loaded 2-core machine.
 */
export async function privateRabbitMqNode(): Promise<PrivateBroker> {
  const port = await freePort();
  const distPort = await freePort();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'idem-rabbitmq-'));
  await writeFile(path.join(dir, 'enabled_plugins'), '[].\n');
  await writeFile(
    path.join(dir, 'rabbitmq.conf'),
    `listeners.tcp.local = 127.0.0.1:${port}\nloopback_users = none\n`,
  );
  const broker = privateBroker({
    port,
    dir,
    command: process.env.RABBITMQ_SERVER_BIN ?? '/usr/lib/rabbitmq/bin/rabbitmq-server',
    args: [],
    env: {
      RABBITMQ_NODENAME: `idem-test-${port}@localhost`,
      RABBITMQ_NODE_PORT: String(port),
      RABBITMQ_DIST_PORT: String(distPort),
      RABBITMQ_MNESIA_BASE: path.join(dir, 'mnesia'),
      RABBITMQ_LOG_BASE: path.join(dir, 'log'),
      RABBITMQ_ENABLED_PLUGINS_FILE: path.join(dir, 'enabled_plugins'),
      RABBITMQ_CONFIG_FILE: path.join(dir, 'rabbitmq.conf'),
      RABBITMQ_PID_FILE: path.join(dir, 'pid'),
      // The Erlang cookie is made in (and read from) $HOME.
      HOME: dir,
    },
    startTimeoutMs: 90_000,
  });
  await broker.start();
  return broker;
}

/**
 * `consumer`, but the deliveries it executes (outcome `executed`: the effect committed) after the first `after`
 * wait before they go back to the adapter — no ack yet — until `release()`: `count` of them, the first `count`
 * executions after `after`. `full` resolves with their ids once all `count` are held, so a fault the test injects
 * then certainly finds committed, unacknowledged deliveries.
 */
export function holdingAfterCommit(
  consumer: MessageConsumer,
  { after, count }: { after: number; count: number },
) {
  let executed = 0;
  const held: string[] = [];
  const full = deferred<string[]>();
  const released = deferred();
  const holding: MessageConsumer = {
    async handle(message) {
      const decision = await consumer.handle(message);
      if (decision.action === 'ack' && decision.outcome === 'executed') {
        executed += 1;
        if (executed > after && executed <= after + count) {
          held.push(message.id);
          if (held.length === count) full.resolve([...held]);
          await released.promise;
        }
      }
      return decision;
    },
  };
  return { consumer: holding, full: full.promise, release: () => released.resolve() };
}
