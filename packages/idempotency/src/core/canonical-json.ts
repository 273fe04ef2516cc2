/**
 * RFC 8785 (JCS) canonical JSON of a JSON value: object keys sorted by UTF-16 code units, no whitespace, every
 * primitive as ECMAScript's JSON.stringify writes it (which is what JCS specifies for numbers and strings).
 * Like JSON.stringify: `toJSON` is honoured, an `undefined` / function / symbol property is left out and becomes
 * `null` in an array. Unlike it, NaN and ±Infinity, lone surrogates and cycles are refused (TypeError / RangeError)
 * instead of silently written as something else. Small on purpose: the browser bundle carries it.
 */
/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function canonicalJson(value: unknown): string | undefined {
  let current = value;
  if (
    current !== null &&
    typeof current === 'object' &&
    'toJSON' in current &&
    typeof current.toJSON === 'function'
  )
    current = current.toJSON();
  if (current instanceof Number || current instanceof String || current instanceof Boolean)
    current = current.valueOf();
  if (typeof current === 'number' && !Number.isFinite(current)) throw new TypeError(`${current} is not JSON`);
  if (typeof current === 'string' && LONE_SURROGATE.test(current))
    throw new TypeError('A lone surrogate is not JSON');
  if (current === null || typeof current !== 'object') return JSON.stringify(current);
  if (Array.isArray(current)) return `[${current.map((item) => canonicalJson(item) ?? 'null').join(',')}]`;
  const members: string[] = [];
  for (const key of Object.keys(current).sort()) {
    const text = canonicalJson((current as Record<string, unknown>)[key]);
    if (text !== undefined) members.push(`${canonicalJson(key)}:${text}`);
  }
  return `{${members.join(',')}}`;
}
