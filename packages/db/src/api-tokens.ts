import { createHash, randomBytes } from 'node:crypto';

/** API tokens are stored as SHA-256 hex digests; the database never holds a usable token. */
export function hashApiToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A new random token: `idem_` + 32 bytes of base64url. */
export function generateApiToken(): string {
  return `idem_${randomBytes(32).toString('base64url')}`;
}
