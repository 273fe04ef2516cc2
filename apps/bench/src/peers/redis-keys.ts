/** The bench's own Redis keys: counted and deleted by prefix, never FLUSHDB (the server is shared). */
import { createClient } from '@redis/client';

export async function withRedis<T>(url: string, use: (client: RedisBench) => Promise<T>): Promise<T> {
  // No reconnect loop: an unreachable Redis must fail this check at once (the section is then skipped).
  const client = createClient({ url, socket: { reconnectStrategy: false, connectTimeout: 3_000 } });
  client.on('error', () => {});
  await client.connect();
  try {
    return await use({
      async deleteByPrefix(prefix) {
        let deleted = 0;
        for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) {
          if (keys.length > 0) deleted += await client.unlink(keys);
        }
        return deleted;
      },
      async version() {
        const info = await client.info('server');
        return /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
      },
    });
  } finally {
    client.destroy();
  }
}

export interface RedisBench {
  deleteByPrefix(prefix: string): Promise<number>;
  version(): Promise<string>;
}
