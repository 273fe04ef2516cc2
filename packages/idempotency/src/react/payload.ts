/**
 * How a sent payload is persisted with its key, and when two payloads are "the same request": exactly when the
 * server would give them the same fingerprint — their canonical wire forms (`core/wire-form.ts`) are equal.
 */
import { canonicalWireForm, plainJsonWire, type WireTransformer } from '../core/wire-form.ts';

/** Turns a payload into text and back. */
export interface PayloadSerializer {
  stringify(value: unknown): string;
  parse(text: string): unknown;
}

/**
 * Stores a payload as the tRPC client's wire form (its links' transformer, e.g. `superjson`; JSON text) and reads
 * it back through the transformer, so a stored payload re-sends the same request.
 */
export function transformerSerializer(transformer: WireTransformer): PayloadSerializer {
  return {
    stringify: (value) => JSON.stringify(transformer.serialize(value)),
    parse: (text) => transformer.deserialize(JSON.parse(text)),
  };
}

/** Plain JSON: `JSON.stringify` and `JSON.parse`. */
export const jsonSerializer: PayloadSerializer = /* @__PURE__ */ transformerSerializer({
  serialize: (value) => value,
  deserialize: (value) => value,
});

/**
 * True when `a` and `b` are the same request on the wire under `transformer` (default: plain JSON), i.e. the
 * server fingerprints them alike. Object key order never matters; an `undefined` property matters exactly when
 * the transformer sends it (superjson does, plain JSON does not). Throws a TypeError for a payload that has no
 * JSON form.
 */
export function payloadEquals(a: unknown, b: unknown, transformer: WireTransformer = plainJsonWire): boolean {
  return canonicalWireForm(a, transformer) === canonicalWireForm(b, transformer);
}

/**
 * The payload as text, after checking that it survives the round trip: a payload that comes back as another
 * request (a Date through plain JSON becomes a string; an `undefined` property through JSON disappears while
 * superjson sends it) would be re-sent as something else after a reload, and the server would answer 422.
 */
export function serializePayload(
  serializer: PayloadSerializer,
  payload: unknown,
  transformer: WireTransformer = plainJsonWire,
): string {
  const text = serializer.stringify(payload);
  if (!payloadEquals(serializer.parse(text), payload, transformer)) {
    throw new TypeError(
      'The payload does not survive `serializer`: read back, it is another request on the wire',
    );
  }
  return text;
}
