/**
 * A fresh idempotency key: a UUID v4. `crypto.randomUUID()` exists only in secure contexts (https, localhost);
 * elsewhere (a LAN address over http) the UUID is built from `crypto.getRandomValues`, which exists everywhere.
 */
export function createIdempotencyKey(): string {
  const webCrypto = globalThis.crypto;
  if (typeof webCrypto?.randomUUID === 'function') return webCrypto.randomUUID();
  // Each 0 and 1 of the template becomes a random hex digit (random ^ 0 or 1, 4 bits); 8 becomes 8–b, the
  // RFC 4122 variant (8 ^ 2 random bits: 15 >> 2); 4 stays (version 4).
  const random = webCrypto.getRandomValues(new Uint8Array(31));
  let index = 0;
  return '10000000-1000-4000-8000-100000000000'.replace(/[018]/g, (digit) =>
    (+digit ^ ((random[index++] as number) & (15 >> (+digit / 4)))).toString(16),
  );
}
