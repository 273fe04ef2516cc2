/**
 * The brokers the queue tests run against (this machine's RabbitMQ and NATS JetStream; AMQP_URL and NATS_URL
 * override them), and what the RabbitMQ and JetStream test files share: the relay that dies between publish and
 * mark (a child process), and the CONTROL publisher that gives JetStream nothing to dedupe by.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { JetStreamClient } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type { OutboxPublisher } from '../../src/consumer/index.ts';
import { MESSAGE_TYPE_HEADER } from '../../src/consumer/jetstream/index.ts';

export const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
export const NATS_SERVERS = process.env.NATS_URL ?? '127.0.0.1:4222';

/** Where the CONTROL publisher puts the message id, instead of `Nats-Msg-Id`. */
export const CONTROL_ID_HEADER = 'Idem-Control-Id';

/** CONTROL (test side): publishes without `Nats-Msg-Id`, so every publish is stored. */
export function plainJetStreamPublisher(js: JetStreamClient): OutboxPublisher {
  const encoder = new TextEncoder();
  return {
    async publish(messages) {
      await Promise.all(
        messages.map((message) => {
          const set = headers();
          set.set(CONTROL_ID_HEADER, message.id);
          set.set(MESSAGE_TYPE_HEADER, message.type);
          return js.publish(message.destination, encoder.encode(message.body), { headers: set });
        }),
      );
    },
  };
}

const WORKER = path.join(import.meta.dirname, 'outbox-relay-worker.ts');
const REPO = path.resolve(import.meta.dirname, '../../../..');

/**
 * Runs one relay pass in a child process that SIGKILLs itself after the broker confirmed its publishes and
 * before it marked them sent (outbox-relay-worker.ts). Resolves once it is dead; rejects if it died otherwise.
 */
export async function relayThatDiesBeforeTheMark(env: Record<string, string>): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    output += chunk;
  });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
  });
  if (signal !== 'SIGKILL' || !output.includes('published\n'))
    throw new Error(
      `the relay was to die by SIGKILL after publishing; it exited ${code ?? signal}:\n${output}`,
    );
}
