/**
 * A fresh idempotency key: a UUID v4. `crypto.randomUUID()` exists only in secure contexts (https, localhost);
 * elsewhere (a LAN address over http) the UUID is built from `crypto.getRandomValues`, which exists everywhere.
 */
export function createIdempotencyKey(): string {
  const webCrypto = globalThis.crypto;
  if (typeof webCrypto?.randomUUID === 'function') return webCrypto.randomUUID();
  // Each 0 and 1 of the template becomes a random hex digit; 8 becomes 8–b (the RFC 4122 variant); 4 stays
  // (version 4).
  const random = webCrypto.getRandomValues(new Uint8Array(31));
  let index = 0;
  return '10000000-1000-4000-8000-100000000000'.replace(/[018]/g, (digit) =>
    (Number(digit) ^ ((random[index++] ?? 0) & (digit === '8' ? 3 : 15))).toString(16),
  );
}
