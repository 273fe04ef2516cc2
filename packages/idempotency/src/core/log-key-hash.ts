/**
 * The key's hash in logs and events (`key_hash`): the first 16 hex digits of the fingerprint of
 * `{ path: "key", input: [scope, key] }`. It names a key without writing the key itself into a log line; the
 * admin tools find a key by it (`@idem/idempotency/prisma`'s key operations).
 */
import { fingerprintRequest } from './fingerprint.ts';

export const LOG_KEY_HASH_LENGTH = 16;

export function logKeyHash(scope: string, key: string): string {
  return fingerprintRequest('key', [scope, key]).slice(0, LOG_KEY_HASH_LENGTH);
}
