/**
 * Real HTTP on loopback for a fetch-style handler (a Next route's POST/GET, or tRPC's fetchRequestHandler):
 * a `node:http` server on port 0 that turns each IncomingMessage into a `Request` (method, every header line
 * in order — duplicates are appended, so they fold into "a, b" as they would behind any proxy — and the body),
 * calls the handler, and writes the `Response` back (status, headers, body).
 *
 * `rawHttpRequest` sends bytes exactly as given (header values `fetch` refuses to send, repeated header lines)
 * and parses the answer.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';

export type FetchHandler = (request: Request) => Promise<Response>;

export interface LoopbackServer {
  /** e.g. `http://127.0.0.1:54321` */
  url: string;
  close(): Promise<void>;
}

export async function serveOnLoopback(handlers: {
  GET?: FetchHandler;
  POST?: FetchHandler;
}): Promise<LoopbackServer> {
  const server = http.createServer((incoming, outgoing) => {
    handle(incoming, outgoing).catch((error: unknown) => {
      // A handler that throws (instead of answering) is a bug worth seeing in the test output.
      console.error('[loopback] handler threw:', error);
      if (!outgoing.headersSent) outgoing.writeHead(500, { 'content-type': 'text/plain' });
      outgoing.end('loopback bridge: handler threw');
    });
  });

  async function handle(incoming: http.IncomingMessage, outgoing: http.ServerResponse) {
    const method = incoming.method ?? 'GET';
    const handler = method === 'GET' ? handlers.GET : method === 'POST' ? handlers.POST : undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of incoming) chunks.push(chunk as Buffer);
    if (!handler) {
      outgoing.writeHead(405, { allow: Object.keys(handlers).join(', ') }).end();
      return;
    }

    const headers = new Headers();
    // rawHeaders keeps every line (node's `headers` object would already have merged or dropped some).
    for (let index = 0; index + 1 < incoming.rawHeaders.length; index += 2) {
      const name = incoming.rawHeaders[index];
      const value = incoming.rawHeaders[index + 1];
      if (name !== undefined && value !== undefined) headers.append(name, value);
    }
    const host = headers.get('host') ?? '127.0.0.1';
    const body = chunks.length > 0 && method !== 'GET' ? Buffer.concat(chunks) : undefined;
    const request = new Request(new URL(incoming.url ?? '/', `http://${host}`), { method, headers, body });

    const response = await handler(request);
    const responseBody = Buffer.from(await response.arrayBuffer());
    const outHeaders: Array<[string, string]> = [];
    response.headers.forEach((value, name) => {
      if (['content-length', 'transfer-encoding', 'connection', 'set-cookie'].includes(name)) return;
      outHeaders.push([name, value]);
    });
    for (const cookie of response.headers.getSetCookie()) outHeaders.push(['set-cookie', cookie]);
    outHeaders.push(['content-length', String(responseBody.length)]);
    outgoing.writeHead(response.status, outHeaders.flat());
    outgoing.end(responseBody);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

export interface RawResponse {
  status: number;
  /** Header lines as received, names lower-cased. */
  headers: Array<[string, string]>;
  header(name: string): string | undefined;
  body: string;
}

/**
 * One HTTP/1.1 request written byte for byte (latin1: every char code 0–255 is one byte), `Connection: close`,
 * the answer read to the end. `headerLines` are `Name: value` strings, sent in order, as given.
 */
export async function rawHttpRequest(
  baseUrl: string,
  options: { method?: string; path: string; headerLines: string[]; body?: string },
): Promise<RawResponse> {
  const url = new URL(baseUrl);
  const body = Buffer.from(options.body ?? '', 'utf8');
  const head = [
    `${options.method ?? 'POST'} ${options.path} HTTP/1.1`,
    `Host: ${url.host}`,
    ...options.headerLines,
    `Content-Length: ${body.length}`,
    'Connection: close',
    '',
    '',
  ].join('\r\n');
  const received = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(Buffer.concat([Buffer.from(head, 'latin1'), body]));
    });
    socket.setTimeout(20_000, () => socket.destroy(new Error('raw request timed out')));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks)));
    socket.on('error', reject);
  });
  const text = received.toString('latin1');
  const split = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = (split === -1 ? text : text.slice(0, split)).split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? Number.NaN);
  const headers = lines.map((line): [string, string] => {
    const colon = line.indexOf(':');
    return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
  });
  let rawBody =
    split === -1 ? Buffer.alloc(0) : received.subarray(Buffer.byteLength(text.slice(0, split + 4), 'latin1'));
  if (headers.some(([name, value]) => name === 'transfer-encoding' && /chunked/i.test(value))) {
    rawBody = dechunk(rawBody);
  }
  return {
    status,
    headers,
    header: (name) => headers.find(([candidate]) => candidate === name.toLowerCase())?.[1],
    body: rawBody.toString('utf8'),
  };
}

function dechunk(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset < data.length) {
    const lineEnd = data.indexOf('\r\n', offset, 'latin1');
    if (lineEnd === -1) break;
    const size = Number.parseInt(data.subarray(offset, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}
