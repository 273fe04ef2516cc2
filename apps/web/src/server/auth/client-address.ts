/**
 * The client's network address, for the limits per address (new orders). Next's App Router does not expose the
 * socket: `next start` writes the peer's address to X-Forwarded-For only when the request has none, and each
 * reverse proxy in front of it appends the address it saw. The entry `proxyHops` from the right is therefore the
 * address the outermost trusted hop saw: 1 for one proxy that appends (nginx's `$proxy_add_x_forwarded_for`),
 * or for `next start` facing clients — where a client's own X-Forwarded-For is passed on untouched, so a
 * deployment that limits by address puts a proxy in front that sets or appends the header.
 */
import { createHmac } from 'node:crypto';

export function clientAddressOf(headers: Headers, proxyHops: number): string | null {
  const entries = (headers.get('x-forwarded-for') ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0);
  if (entries.length === 0) return null;
  // Fewer entries than hops: the request came through fewer proxies than configured; the leftmost is the client.
  return entries[Math.max(0, entries.length - proxyHops)] ?? null;
}

/**
 * What an order keeps of its client's address: a keyed hash (HMAC-SHA256 under the server's secret, 128 bits),
 * enough to count orders per address and useless for reading the address back.
 */
export function clientRefOf(address: string, secret: string): string {
  return createHmac('sha256', secret).update(`client-address\0${address}`).digest('hex').slice(0, 32);
}
