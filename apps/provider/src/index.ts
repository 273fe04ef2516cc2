/**
 * In-process entry point: tests (this package's and other apps') start a real provider on a random port with it.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createPool, ensureSchema } from './db.ts';
import { DEFAULT_SECRET_KEY } from './env.ts';
import { createRequestListener } from './http.ts';
import { Knobs } from './knobs.ts';
import { DEFAULT_WEBHOOK_SECRET } from './signature.ts';
import { traced } from './tracing.ts';
import { parseWebhookUrl, WebhookDispatcher } from './webhooks.ts';

export type { ChargeObject } from './charges.ts';
export { DEFAULT_SECRET_KEY } from './env.ts';
export type { EventObject, EventType, EventWithDelivery } from './events.ts';
export type { KnobState } from './knobs.ts';
export type { RefundObject } from './refunds.ts';
export {
  DEFAULT_TOLERANCE_SECONDS,
  DEFAULT_WEBHOOK_SECRET,
  SIGNATURE_HEADER,
  signWebhookPayload,
  type VerifyOptions,
  verifyWebhookSignature,
  type WebhookBody,
} from './signature.ts';
export type { DeliveryResult } from './webhooks.ts';

export interface ProviderOptions {
  databaseUrl: string;
  /** 0 picks a free port; read the chosen one from the result. */
  port: number;
  host?: string;
  secretKey?: string;
  /** Enables /__knobs and /__webhooks (latency, failures, dropped responses, webhook faults). Never on in production-like runs. */
  testKnobs?: boolean;
  /** Where events are POSTed (http/https). Unset: events are recorded, nothing is delivered. */
  webhookUrl?: string;
  /** HMAC secret for the Idem-Signature header; default `whsec_test_idem`. */
  webhookSecret?: string;
  /** Where unexpected errors are reported; defaults to stderr. */
  log?: (line: string) => void;
}

export interface RunningProvider {
  url: string;
  port: number;
  /**
   * Stops accepting connections and the webhook loop, lets in-flight requests and deliveries finish (bounded),
   * then ends the pool. Idempotent.
   */
  close(): Promise<void>;
}

/** How long close() waits for in-flight requests before cutting their connections. */
const SHUTDOWN_GRACE_MS = 5_000;

export async function startProvider(options: ProviderOptions): Promise<RunningProvider> {
  const host = options.host ?? '127.0.0.1';
  const log = options.log ?? ((line: string) => console.error(line));
  const webhookUrl = options.webhookUrl === undefined ? undefined : parseWebhookUrl(options.webhookUrl).href;
  const knobs = options.testKnobs ? new Knobs() : undefined;
  const pool = createPool(options.databaseUrl, log);
  const webhooks =
    webhookUrl === undefined
      ? undefined
      : new WebhookDispatcher(
          pool,
          { url: webhookUrl, secret: options.webhookSecret ?? DEFAULT_WEBHOOK_SECRET },
          knobs,
          log,
        );

  // Responses not yet sent; on close() they are told to close their keep-alive connection, otherwise the server
  // would wait for the client to drop it (seconds) before close() could resolve.
  const pending = new Set<ServerResponse>();
  let closing = false;

  let server: Server;
  try {
    // Schema first, so the port only opens once requests can be served.
    await ensureSchema(pool);
    const listener = createRequestListener({
      pool,
      secretKey: options.secretKey ?? DEFAULT_SECRET_KEY,
      knobs,
      outbox: { webhookUrl },
      webhooks,
      log,
    });
    server = createServer((req, res) => {
      if (closing) res.setHeader('Connection', 'close');
      pending.add(res);
      res.on('close', () => pending.delete(res));
      traced(req, res, listener);
    });
    await listen(server, options.port, host);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }

  // Only once serving: a failed start leaves no loop behind. Leftover due deliveries (from before a restart, or
  // another process's expired leases) are picked up on the first poll.
  webhooks?.start();

  const address = server.address();
  // Only a pipe/socket-path server returns a string; we always listen on TCP.
  if (address === null || typeof address === 'string') throw new Error('provider: unexpected listen address');
  const { port } = address;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  let closingDone: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closingDone ??= (async () => {
      closing = true;
      for (const res of pending) if (!res.headersSent) res.setHeader('Connection', 'close');
      // Held charge responses go out now: a test's hold must not keep the process from stopping.
      knobs?.charges.release();
      const serverClosed = new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        // Idle keep-alive sockets would otherwise hold close() open until they time out.
        server.closeIdleConnections();
      });
      // The loop stops claiming at once; deliveries in flight (≤ 5 s each) still get their outcome recorded.
      await Promise.all([serverClosed, webhooks?.close()]);
      await pool.end();
    })();
    return closingDone;
  };

  return { url: `http://${urlHost}:${port}`, port, close };
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => {
      server.off('listening', onListening);
      reject(err);
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}
