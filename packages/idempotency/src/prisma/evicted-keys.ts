/**
 * Evictions, told to every process's replay cache (core/replay-cache.ts). The Postgres store's `evict` sends a
 * NOTIFY on `idem_key_evicted` in the eviction's transaction — delivered only if it commits — and each process
 * that keeps a replay cache LISTENs on a connection of its own (`forgetEvictedKeys`) and drops the key.
 */
import type { RecordKey } from '../core/record.ts';
import type { ReplayCache } from '../core/replay-cache.ts';

export const EVICTED_KEYS_CHANNEL = 'idem_key_evicted';

/** Postgres refuses a NOTIFY payload of 8 000 bytes or more; past this, the notice says "forget every key". */
const MAX_NOTICE_BYTES = 7_900;
const FORGET_ALL = '*';

/** The NOTIFY payload for an evicted key. */
export function evictionNotice(key: RecordKey): string {
  const notice = JSON.stringify([key.scope, key.procedure, key.key]);
  return Buffer.byteLength(notice) > MAX_NOTICE_BYTES ? FORGET_ALL : notice;
}

function keyOfNotice(payload: string | undefined): RecordKey | null {
  try {
    const parsed: unknown = JSON.parse(payload ?? '');
    if (!Array.isArray(parsed) || parsed.length !== 3) return null;
    const [scope, procedure, key] = parsed as unknown[];
    if (typeof scope === 'string' && typeof procedure === 'string' && typeof key === 'string')
      return { scope, procedure, key };
  } catch {}
  return null;
}

/** The part of a node-postgres `Client` (a dedicated one, not a pool's) the listener uses. */
export interface NotificationClient {
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'end' | 'error', listener: () => void): unknown;
}

/**
 * Drops each evicted key from `cache` as its notice arrives on `client`. A connection that ends or fails may
 * have missed notices: the whole cache is cleared then; reconnect with a new client and call this again.
 */
export async function forgetEvictedKeys(client: NotificationClient, cache: ReplayCache): Promise<void> {
  client.on('notification', (message) => {
    if (message.channel !== EVICTED_KEYS_CHANNEL) return;
    const key = keyOfNotice(message.payload);
    if (key) cache.forget(key);
    else cache.clear();
  });
  client.on('end', () => cache.clear());
  client.on('error', () => cache.clear());
  await client.query(`LISTEN ${EVICTED_KEYS_CHANNEL}`);
}
