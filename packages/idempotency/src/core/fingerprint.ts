/**
 * The request fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of { path, input }. Canonical JSON
 * sorts object keys, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same request; any other change is not.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

export function fingerprintRequest(path: string, input: unknown): string {
  const canonical = canonicalize({ path, input: input === undefined ? null : input });
  if (canonical === undefined) throw new TypeError('The request input cannot be represented as JSON.');
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}
