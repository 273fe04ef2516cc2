/**
 * The request fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of { path, input }, where `input` is
 * the canonical wire form (`wire-form.ts`) — the same text the browser compares payloads by. Canonical JSON
 * sorts object keys, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same request; any other change is not.
 */
import { hash } from 'node:crypto';
import { canonicalWireForm, type WireTransformer } from './wire-form.ts';

/**
 * @param input the input as it travels on the wire, or (with `transformer`) as the procedure receives it.
 * @param transformer the router's transformer; omitted, `input` is taken as plain JSON.
 */
export function fingerprintRequest(
  path: string,
  input: unknown,
  transformer?: Pick<WireTransformer, 'serialize'>,
): string {
  // JCS of { path, input }: its two keys sorted ("input" < "path"), no whitespace, strings as JSON.stringify.
  const canonical = `{"input":${canonicalWireForm(input, transformer)},"path":${JSON.stringify(path)}}`;
  // One-shot: no Hash object per request (a first execution hashes twice: this and the log's key hash).
  return hash('sha256', canonical, 'hex');
}
