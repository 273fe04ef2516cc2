/**
 * A TCP proxy between a Postgres client and server that reads just enough of the wire protocol to cut one
 * connection at a chosen statement:
 *
 * - `before`: the matching frontend message ('Q' simple query, or 'P' Parse of the extended protocol) is never
 *   forwarded; both sockets close. The server sees the client vanish mid-transaction and rolls back.
 * - `after`: the statement reaches the server; the server's CommandComplete ('C', e.g. `COMMIT`) and everything
 *   after it are swallowed and the client socket is destroyed at once (the client never hears). The server
 *   socket is closed only after the server's ReadyForQuery ('Z'), so an extended-protocol statement's implicit
 *   transaction (committed at Sync) is committed before the server sees the disconnect.
 *
 * Only connections made through the proxy are affected; every rule fires `times` times, then disarms.
 */
import net from 'node:net';

export type CutWhen = 'before' | 'after';

export interface CutRule {
  /** Matched against the SQL text of 'Q' and 'P' messages. */
  statement: RegExp;
  when: CutWhen;
  /** How many connections to cut before the rule disarms. Default 1. */
  times?: number;
}

export interface CutEvent {
  when: CutWhen;
  sql: string;
  /** `after` only: the CommandComplete tag the client never received (e.g. `COMMIT`, `UPDATE 1`). */
  swallowedTag?: string;
}

interface ArmedRule extends CutRule {
  remaining: number;
}

const SSL_REQUEST_CODE = 80877103;

export class PgCutProxy {
  readonly cuts: CutEvent[] = [];
  /** Every statement seen, for debugging a rule that does not match. */
  readonly statements: string[] = [];
  private rules: ArmedRule[] = [];
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly target: { host: string; port: number },
    readonly port: number,
    server: net.Server,
  ) {
    this.server = server;
  }

  static async start(target: { host: string; port: number }): Promise<PgCutProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (!address || typeof address !== 'object') throw new Error('proxy: no address');
    const proxy = new PgCutProxy(target, address.port, server);
    server.on('connection', (client) => proxy.handle(client));
    return proxy;
  }

  /** The same URL with host and port replaced by the proxy's. */
  urlFor(databaseUrl: string): string {
    const url = new URL(databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.toString();
  }

  arm(rule: CutRule): void {
    this.rules.push({ ...rule, remaining: rule.times ?? 1 });
  }

  disarm(): void {
    this.rules = [];
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private take(sql: string): ArmedRule | undefined {
    const rule = this.rules.find((candidate) => candidate.remaining > 0 && candidate.statement.test(sql));
    if (rule) {
      rule.remaining -= 1;
      if (rule.remaining === 0) this.rules = this.rules.filter((candidate) => candidate !== rule);
    }
    return rule;
  }

  private handle(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    this.sockets.add(client);
    this.sockets.add(upstream);
    // A cut or a server restart surfaces as socket errors on either side: expected, never fatal.
    client.on('error', () => {});
    upstream.on('error', () => {});
    let frontend = Buffer.alloc(0);
    let backend = Buffer.alloc(0);
    let startupDone = false;
    let backendRawBytes = 0; // the single-byte answer to an SSLRequest
    let cutting = false; // `before` fired: forward nothing more
    let pending: { sql: string } | null = null; // `after` armed on this connection
    let swallowing = false; // CommandComplete seen: swallow until ReadyForQuery, then close

    client.on('close', () => {
      this.sockets.delete(client);
      // After an `after` cut the server socket stays open until the server's ReadyForQuery (bounded).
      if (swallowing) setTimeout(() => upstream.destroy(), 2_000).unref();
      else upstream.destroy();
    });
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });

    client.on('data', (chunk: Buffer) => {
      if (cutting) return;
      frontend = Buffer.concat([frontend, chunk]);
      const out: Buffer[] = [];
      for (;;) {
        if (!startupDone) {
          if (frontend.length < 8) break;
          const length = frontend.readInt32BE(0);
          if (frontend.length < length) break;
          if (frontend.readInt32BE(4) === SSL_REQUEST_CODE) backendRawBytes = 1;
          else startupDone = true;
          out.push(frontend.subarray(0, length));
          frontend = frontend.subarray(length);
          continue;
        }
        if (frontend.length < 5) break;
        const length = frontend.readInt32BE(1);
        if (frontend.length < 1 + length) break;
        const message = frontend.subarray(0, 1 + length);
        frontend = frontend.subarray(1 + length);
        const type = String.fromCharCode(message[0] ?? 0);
        const sql = type === 'Q' || type === 'P' ? sqlOf(type, message) : undefined;
        if (sql !== undefined) {
          this.statements.push(sql);
          const rule = this.take(sql);
          if (rule?.when === 'before') {
            this.cuts.push({ when: 'before', sql });
            cutting = true;
            client.destroy();
            // FIN after whatever preceded the statement: the server reads it, then sees the client gone.
            if (out.length > 0) upstream.end(Buffer.concat(out));
            else upstream.end();
            return;
          }
          if (rule?.when === 'after') pending = { sql };
        }
        out.push(message);
      }
      if (out.length > 0) upstream.write(Buffer.concat(out));
    });

    upstream.on('data', (chunk: Buffer) => {
      backend = Buffer.concat([backend, chunk]);
      const out: Buffer[] = [];
      if (backendRawBytes > 0 && backend.length > 0) {
        out.push(backend.subarray(0, 1));
        backend = backend.subarray(1);
        backendRawBytes = 0;
      }
      for (;;) {
        if (backend.length < 5) break;
        const length = backend.readInt32BE(1);
        if (backend.length < 1 + length) break;
        const message = backend.subarray(0, 1 + length);
        backend = backend.subarray(1 + length);
        const type = String.fromCharCode(message[0] ?? 0);
        if (swallowing) {
          if (type === 'Z') {
            upstream.end();
            return;
          }
          continue;
        }
        if (pending && type === 'C') {
          this.cuts.push({ when: 'after', sql: pending.sql, swallowedTag: cString(message, 5).value });
          pending = null;
          swallowing = true;
          if (out.length > 0) client.write(Buffer.concat(out));
          out.length = 0;
          client.destroy();
          continue;
        }
        out.push(message);
      }
      if (out.length > 0 && !client.destroyed) client.write(Buffer.concat(out));
    });
  }
}

/** The SQL of a 'Q' (query\0) or 'P' (name\0 query\0 …) message. */
function sqlOf(type: string, message: Buffer): string {
  if (type === 'Q') return cString(message, 5).value;
  const name = cString(message, 5);
  return cString(message, name.next).value;
}

function cString(buffer: Buffer, start: number): { value: string; next: number } {
  const end = buffer.indexOf(0, start);
  const stop = end === -1 ? buffer.length : end;
  return { value: buffer.toString('utf8', start, stop), next: stop + 1 };
}
