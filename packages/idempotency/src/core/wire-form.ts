/**
 * The one definition of "the same payload": a request's input as its transformer puts it on the wire, written
 * as RFC 8785 (JCS) canonical JSON. The server hashes it into the request fingerprint (`fingerprint.ts`); the
 * browser compares it to decide whether a re-sent payload is the one it sent before (`react/payload.ts`). Two
 * payloads are the same exactly when their canonical wire forms are equal, so the browser and the server can
 * never disagree about it. Browser-safe: no `node:*`.
 */
import { canonicalJson } from './canonical-json.ts';

/**
 * A tRPC data transformer (`superjson` fits): how values go on the wire and come back. The one shape every part
 * of the library takes — the server's fingerprint and replays, the browser's stored payloads. Must match the
 * router's transformer.
 */
export interface WireTransformer {
  serialize(value: unknown): unknown;
  deserialize(value: unknown): unknown;
}

/** No transformer (tRPC's default): values travel as they are, as plain JSON. */
export const plainJsonWire: WireTransformer = { serialize: (value) => value, deserialize: (value) => value };

/**
 * The canonical JSON text of `input` as `transformer` sends it. No input (`undefined`, `null`) is `null`.
 * Throws a TypeError for an input that has no JSON form (a lone surrogate, NaN, a cycle).
 */
export function canonicalWireForm(
  input: unknown,
  transformer: Pick<WireTransformer, 'serialize'> = plainJsonWire,
): string {
  const wire = input === undefined || input === null ? null : transformer.serialize(input);
  let text: string | undefined;
  try {
    text = canonicalJson(wire);
  } catch (error) {
    throw new TypeError('The request input cannot be represented as canonical JSON.', { cause: error });
  }
  if (text === undefined) throw new TypeError('The request input cannot be represented as canonical JSON.');
  return text;
}
