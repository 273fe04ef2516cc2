/** How a sent payload is persisted with its key, and when two payloads are "the same purchase". */

/** Turns a payload into text and back. Default JSON; pass `superjson` when the input holds Dates, Maps, … */
export interface PayloadSerializer {
  stringify(value: unknown): string;
  parse(text: string): unknown;
}

export const jsonSerializer: PayloadSerializer = {
  stringify: (value) => JSON.stringify(value),
  parse: (text) => JSON.parse(text),
};

/** A plain object's entries, a property set to `undefined` counting as absent (as it does on the wire). */
const definedEntries = (value: object) => Object.entries(value).filter(([, item]) => item !== undefined);

/**
 * Structural equality of two payloads: plain objects (a property set to `undefined` counts as absent, as it
 * does on the wire), arrays, Dates (by time), Maps, Sets, primitives (`Object.is`). Class instances of
 * different prototypes are different.
 */
export function payloadEquals(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (a instanceof Date) return a.getTime() === (b as Date).getTime();
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((item, index) => payloadEquals(item, other[index]));
  }
  if (a instanceof Set) {
    const other = [...(b as Set<unknown>)];
    return (
      a.size === other.length &&
      [...a].every((item) => other.some((candidate) => payloadEquals(item, candidate)))
    );
  }
  // Maps by their entries, other objects by their defined properties: same keys, equal values.
  const left = a instanceof Map ? [...a] : definedEntries(a);
  const right = new Map(a instanceof Map ? (b as Map<unknown, unknown>) : definedEntries(b));
  return (
    left.length === right.size &&
    left.every(([key, value]) => right.has(key) && payloadEquals(value, right.get(key)))
  );
}

/**
 * The payload as text, after checking that it survives the round trip: a payload that comes back different
 * (a Date through JSON becomes a string) would be re-sent as something else after a reload — the server would
 * answer 422, and the in-doubt attempt could not be resolved.
 */
export function serializePayload(serializer: PayloadSerializer, payload: unknown): string {
  const text = serializer.stringify(payload);
  if (!payloadEquals(serializer.parse(text), payload)) {
    throw new TypeError('The payload does not survive `serializer` (a Date through JSON?)');
  }
  return text;
}
